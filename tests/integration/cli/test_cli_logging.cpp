// Failures reach the log file, --log-format json writes JSON lines (issue 13, point 6), and colour
// follows --color and NO_COLOR (point 10).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "support/harness.hpp"

using nlohmann::json;

TEST_CASE("logging: the error that ends a command is written to --log-file too") {
  rt::TestDb db;
  db.migrate();
  std::string log = db.dir() + "/r.log";
  auto r = db.ok({"activity", "show", "nope", "--log-file", log, "--log-level", "warn"}, 67);
  CHECK(r.err.find("rewardctl: no activity 'nope'") != std::string::npos);
  std::string text = rt::read_file(log);
  CHECK(text.find(" error [") != std::string::npos);
  CHECK(text.find("no activity 'nope'") != std::string::npos);
  // a usage error found by the command itself, and a config error after the log file is open
  db.ok({"record", "show", "--log-file", log}, 64);
  CHECK(rt::read_file(log).find("record show needs exactly one of") != std::string::npos);
}

TEST_CASE("logging: --log-format json writes one JSON object per line, errors included") {
  rt::TestDb db;
  std::string log = db.dir() + "/r.jsonl";
  auto m = db.ok({"db", "migrate", "--log-file", log, "--log-format", "json"});
  auto show = db.ok({"activity", "show", "nope", "--log-file", log, "--log-format", "json"}, 67);
  // standard error is JSON lines too, for a shipper reading a container's stderr
  for (auto& l : rt::lines(show.err)) CHECK(json::accept(l));
  auto lines = rt::lines(rt::read_file(log));
  REQUIRE(lines.size() >= 2);
  bool saw_info = false, saw_error = false;
  for (auto& l : lines) {
    INFO(l);
    json j = json::parse(l);
    CHECK(j["ts"].get<std::string>().size() == 24);  // 2025-11-30T15:59:59.000Z
    CHECK(j["pid"].is_number_integer());
    if (j["level"] == "info" && j["msg"].get<std::string>().find("migration") != std::string::npos) saw_info = true;
    if (j["level"] == "error" && j["msg"] == "no activity 'nope' (see rewardctl activity list)") saw_error = true;
  }
  CHECK(saw_info);
  CHECK(saw_error);
  db.ok({"db", "status", "--log-format", "xml"}, 64);
}

TEST_CASE("logging: colour with --color always, none with never or NO_COLOR") {
  rt::TestDb db;
  const std::string esc = "\x1b[";
  auto always = db.ok({"db", "migrate", "--color", "always"});
  CHECK(always.err.find(esc) != std::string::npos);
  auto never = db.ok({"db", "migrate", "--color", "never"});
  CHECK(never.err.find(esc) == std::string::npos);
  CHECK(never.err.find("info: ") != std::string::npos);
  auto no_color = db.ok({"db", "migrate"}, 0, {{"NO_COLOR", "1"}, {"REWARDCTL_COLOR", ""}});
  CHECK(no_color.err.find(esc) == std::string::npos);
  auto forced = db.ok({"db", "migrate", "--color", "always"}, 0, {{"NO_COLOR", "1"}});
  CHECK(forced.err.find(esc) != std::string::npos);  // the flag wins over the environment
  db.ok({"db", "status", "--color", "sometimes"}, 64);
}

TEST_CASE("logging: on a terminal auto colours, unless NO_COLOR is set - also when auto is given as a flag") {
  rt::TestDb db;
  const std::string esc = "\x1b[";
  // script(1) gives rewardctl a pseudo-terminal; what it printed comes back on script's stdout
  auto on_tty = [&](const std::string& args, std::map<std::string, std::string> env) {
    env["SHELL"] = "/bin/bash";
    env["REWARDCTL_DB"] = db.url();
    std::string cmd = std::string("'") + REWARDCTL_BIN + "' " + args;
    auto r = rt::run_program({"script", "-qec", cmd, "/dev/null"}, env);
    INFO(args << ": " << r.out << r.err);
    CHECK(r.rc == 0);
    return r.out;
  };
  CHECK(on_tty("db migrate", {{"NO_COLOR", ""}}).find(esc) != std::string::npos);  // empty: not set
  CHECK(on_tty("db migrate", {{"NO_COLOR", "1"}}).find(esc) == std::string::npos);
  CHECK(on_tty("db migrate --color auto", {{"NO_COLOR", "1"}}).find(esc) == std::string::npos);
  CHECK(on_tty("db migrate --color always", {{"NO_COLOR", "1"}}).find(esc) != std::string::npos);
  CHECK(on_tty("db migrate --color never", {}).find(esc) == std::string::npos);
  // a bad value in the environment is a configuration error naming it
  auto bad = db.ok({"db", "status"}, 78, {{"REWARDCTL_COLOR", "rainbow"}});
  CHECK(bad.err.find("color must be one of always|auto|never, not 'rainbow'") != std::string::npos);
}
