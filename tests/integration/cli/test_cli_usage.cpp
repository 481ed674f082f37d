// The first contact with the binary: usage without a command, unknown commands with a "did you
// mean", --version and `version`, global options in every --help, consistent positional names, and
// completion scripts that a shell loads (issue 13, points 2 and 3).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <sstream>

#include "support/harness.hpp"

namespace {

const std::vector<std::string> kGlobal = {"--config", "--db",        "--output", "--log-level", "--log-file",
                                          "--log-format", "--color", "--operator", "--quiet"};

// Every command path, from the "Subcommands:" sections of --help.
void commands(const std::vector<std::string>& path, std::vector<std::vector<std::string>>& out) {
  auto args = path;
  args.push_back("--help");
  auto r = rt::run(args);
  REQUIRE(r.rc == 0);
  out.push_back(path);
  std::stringstream ss(r.out);
  std::string line;
  bool in_subs = false;
  static const std::regex sub_re("^  ([a-z][a-z0-9-]*)\\s");
  while (std::getline(ss, line)) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in_subs = true;
      continue;
    }
    if (line.empty() || line[0] != ' ') in_subs = false;
    std::smatch m;
    if (in_subs && std::regex_search(line, m, sub_re)) {
      auto next = path;
      next.push_back(m[1]);
      commands(next, out);
    }
  }
}

}  // namespace

TEST_CASE("cli: no arguments prints the command groups and exits 64") {
  auto r = rt::run({});
  CHECK(r.rc == 64);
  CHECK(r.err.find("usage: rewardctl") != std::string::npos);
  for (auto c : {"db", "activity", "claim", "record", "import-qualifications", "completion", "version"})
    CHECK_MESSAGE(r.err.find("\n  " + std::string(c) + " ") != std::string::npos, c);
  CHECK(r.out.empty());
}

TEST_CASE("cli: an unknown command is named with a did-you-mean, exit 64") {
  auto r = rt::run({"activty", "list"});
  CHECK(r.rc == 64);
  CHECK(r.err.find("unknown command 'activty' (did you mean 'activity'?)") != std::string::npos);
  r = rt::run({"--db", "sqlite:/nonexistent/x.db", "activity", "creat", "-f", "x"});
  CHECK(r.rc == 64);
  CHECK(r.err.find("unknown command 'activity creat' (did you mean 'activity create'?)") != std::string::npos);
  r = rt::run({"activity"});
  CHECK(r.rc == 64);
  CHECK(r.err.find("'activity' needs a command: ") != std::string::npos);
  r = rt::run({"zzzzzz"});
  CHECK(r.rc == 64);
  CHECK(r.err.find("unknown command 'zzzzzz': see rewardctl --help") != std::string::npos);
  r = rt::run({"expier"});
  CHECK(r.rc == 64);
  CHECK(r.err.find("unknown command 'expier' (did you mean 'expire'?)") != std::string::npos);
  r = rt::run({"resend", "abandn", "B1", "--reason", "x"});
  CHECK(r.rc == 64);
  CHECK(r.err.find("unknown command 'resend abandn' (did you mean 'resend abandon'?)") != std::string::npos);
  // a global option's value is not mistaken for a command
  r = rt::run({"-o", "json", "--log-level", "warn", "help", "exit-codes"});
  CHECK(r.rc == 0);
}

TEST_CASE("cli: --version, -V and the version command") {
  for (auto flag : {"--version", "-V"}) {
    auto r = rt::run({flag});
    CHECK(r.rc == 0);
    CHECK(r.out.rfind("rewardctl " REWARDCTL_VERSION " (commit ", 0) == 0);
    CHECK(r.out.find(", schema ") != std::string::npos);
  }
  auto r = rt::run({"version", "-o", "json"});
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["version"] == REWARDCTL_VERSION);
  CHECK(j["schema_version"].get<int>() >= 1);
  CHECK(!j["commit"].get<std::string>().empty());
  for (auto lib : {"sqlite", "libpq", "libpqxx", "libcurl", "openssl", "spdlog", "fmt", "toml++", "cli11"})
    CHECK_MESSAGE(j["libraries"].contains(lib), lib);
  CHECK(j["libraries"]["sqlite"].get<std::string>().rfind("3.", 0) == 0);
  auto t = rt::run({"version"});
  CHECK(t.rc == 0);
  CHECK(t.out.find("schema_version") != std::string::npos);
  CHECK(t.out.find("LIBRARY") != std::string::npos);
  auto h = rt::run({"help"});
  CHECK(h.rc == 0);
  CHECK(h.out.find("usage: rewardctl") != std::string::npos);
}

TEST_CASE("cli: every command's --help names the global options, and positionals are in capitals") {
  std::vector<std::vector<std::string>> all;
  commands({}, all);
  CHECK(all.size() > 25);
  static const std::regex positional_line("^  ([A-Za-z_]+) ");
  for (auto& path : all) {
    auto args = path;
    args.push_back("--help");
    auto r = rt::run(args);
    std::string name;
    for (auto& p : path) name += p + " ";
    CAPTURE(name);
    for (auto& g : kGlobal) CHECK_MESSAGE(r.out.find(g) != std::string::npos, g << " missing from --help of " << name);
    // positional names: the "Positionals:" section of CLI11's help
    auto at = r.out.find("Positionals:");
    if (at == std::string::npos) continue;
    std::stringstream ss(r.out.substr(at));
    std::string line;
    std::getline(ss, line);
    while (std::getline(ss, line) && !line.empty()) {
      std::smatch m;
      if (!std::regex_search(line, m, positional_line)) continue;
      std::string pos = m[1];
      CHECK_MESSAGE(std::all_of(pos.begin(), pos.end(), [](char c) { return std::isupper(c) || c == '_'; }),
                    "positional '" << pos << "' of " << name << " is not in capitals");
    }
  }
}

TEST_CASE("cli: completion scripts are generated from the command tree and load in bash") {
  rt::TestDb db;
  db.migrate();
  auto bash = rt::run({"completion", "bash"});
  REQUIRE(bash.rc == 0);
  std::string dir = rt::make_temp_dir();
  std::string script = rt::write_file(dir, "rewardctl.bash", bash.out);
  auto syntax = rt::run_program({"bash", "-n", script});
  CHECK_MESSAGE(syntax.rc == 0, syntax.err);
  auto loaded = rt::run_program({"bash", "-c", "source " + script + " && complete -p rewardctl"});
  CHECK(loaded.rc == 0);
  CHECK(loaded.out.find("complete -F _rewardctl rewardctl") != std::string::npos);
  // what a TAB would offer: commands, subcommands, options, choices, and activity codes from the database
  auto complete = [&](const std::string& words) {
    std::string cmd = "source " + script + "; COMP_WORDS=(" + words + "); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); " +
                      "_rewardctl; printf '%s\\n' \"${COMPREPLY[@]}\"";
    auto r = rt::run_program({"bash", "-c", cmd}, {{"REWARDCTL_DB", db.url()}});
    INFO(words << " -> " << r.out << r.err);
    CHECK(r.rc == 0);
    return r.out;
  };
  CHECK(complete("rewardctl act").find("activity\n") != std::string::npos);
  auto subs = complete("rewardctl activity ''");
  for (auto s : {"apply", "create", "offline", "show"}) CHECK(subs.find(std::string(s) + "\n") != std::string::npos);
  CHECK(complete("rewardctl activity offline --y").find("--yes\n") != std::string::npos);
  // the job commands are in the tree like every other: nothing to add by hand when one lands
  auto top = complete("rewardctl ''");
  for (auto s : {"expire", "resend", "jobs", "reconcile"}) CHECK_MESSAGE(top.find(std::string(s) + "\n") != std::string::npos, s);
  auto rs = complete("rewardctl resend ''");
  for (auto s : {"list", "retry", "abandon"}) CHECK(rs.find(std::string(s) + "\n") != std::string::npos);
  CHECK(complete("rewardctl resend abandon --y").find("--yes\n") != std::string::npos);
  CHECK(complete("rewardctl activity offline --d").find("--db\n") != std::string::npos);  // global options too
  CHECK(complete("rewardctl -o ''") == "table\njson\n");
  // dynamic: activity codes from the configured database
  db.ok({"activity", "create", "-f", std::string(REWARDCTL_SOURCE_DIR) + "/examples/activities/lucky_draw.toml"});
  auto codes = complete(std::string(REWARDCTL_BIN) + " activity show ''");
  CHECK(codes.find("mid_autumn_draw_2027") != std::string::npos);

  for (auto shell : {"zsh", "fish"}) {
    auto r = rt::run({"completion", shell});
    CHECK(r.rc == 0);
    CHECK(r.out.find("offline") != std::string::npos);
    bool has_global = r.out.find("--log-format") != std::string::npos || r.out.find("-l log-format") != std::string::npos;
    CHECK(has_global);
  }
  CHECK(rt::run({"completion", "tcsh"}).rc == 64);
  std::string rm = "rm -rf '" + dir + "'";
  (void)!system(rm.c_str());
}
