// What commands print: work results on stdout even with --quiet (issue 13, point 7), one exit code
// for a name that does not exist and one timestamp format (point 8), and terminal-safe tables
// with display widths from the C library (point 11).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <regex>

#include "support/harness.hpp"

using nlohmann::json;

namespace {

// A live redpack activity "out" open for years, created and published through the binary.
void live_activity(const rt::TestDb& db) {
  auto t = rt::run({"activity", "new", "--kind", "redpack", "--code", "out", "--start", "2025-01-01T00:00:00Z",
                    "--days", "20000"});
  REQUIRE(t.rc == 0);
  rt::write_file(db.dir(), "out.toml", t.out);
  db.ok({"activity", "create", "-f", "out.toml", "--operator", "alice"});
  db.ok({"activity", "approve", "out", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "out", "--as", "tech", "--operator", "carol"});
  db.ok({"activity", "publish", "out", "--full"});
}

}  // namespace

TEST_CASE("output: import-qualifications and qualification revoke print their summary on stdout, also with -q") {
  rt::TestDb db;
  db.migrate();
  live_activity(db);
  rt::write_file(db.dir(), "q.csv", "user_id\nu1\nu2\n");
  auto imp = db.ok({"import-qualifications", "out", "q.csv", "-q"});
  CHECK(imp.out.find("inserted") != std::string::npos);
  CHECK(std::regex_search(imp.out, std::regex("\ninserted +2\n")));
  CHECK(imp.err.empty());
  auto rev = db.ok({"qualification", "revoke", "out", "q.csv", "--yes", "-q"});
  CHECK(std::regex_search(rev.out, std::regex("\nrevoked +2\n")));
}

TEST_CASE("output: a name that does not exist is exit 67 in every command") {
  rt::TestDb db;
  db.migrate();
  live_activity(db);
  for (auto args : std::vector<std::vector<std::string>>{
           {"activity", "show", "nope"},
           {"activity", "history", "nope"},
           {"activity", "approve", "nope", "--as", "product"},
           {"activity", "offline", "nope", "--reason", "x", "--yes"},
           {"record", "show", "R123"},
           {"record", "show", "--biz-id", "nope"},
           {"reverse", "R123", "--reason", "x", "--yes"},
           {"reverse", "--biz-id", "nope", "--reason", "x", "--yes"},
           {"record", "complete", "B123", "--ok"},
           {"qualification", "show", "out", "nobody"},
           {"qualification", "show", "nope", "u1"},
           {"qualification", "count", "nope"},
       }) {
    auto r = db.ok(args, 67);
    CHECK(r.out.empty());
  }
}

TEST_CASE("output: every timestamp has millisecond precision") {
  rt::TestDb db;
  db.migrate();
  live_activity(db);
  db.ok({"claim", "out", "--user", "u1", "--biz-id", "t1"}, 0, {{"REWARDCTL_NOW", "2026-01-01T00:00:00Z"}});
  static const std::regex ts("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z$");
  auto g = json::parse(db.ok({"record", "show", "--biz-id", "t1", "-o", "json"}).out);
  CHECK(g["created_at"] == "2026-01-01T00:00:00.000Z");
  for (auto key : {"created_at", "updated_at"}) CHECK(std::regex_match(g[key].get<std::string>(), ts));
  for (auto& l : rt::lines(db.ok({"activity", "history", "out", "-o", "json"}).out)) {
    auto at = json::parse(l)["at"].get<std::string>();
    CAPTURE(at);
    CHECK(std::regex_match(at, ts));
  }
  auto b = json::parse(rt::lines(db.ok({"ledger", "balance", "u1", "-o", "json"}).out).at(0));
  CHECK(std::regex_match(b["updated_at"].get<std::string>(), ts));
}

TEST_CASE("output: control characters in reasons and ids are escaped in tables, widths come from wcwidth") {
  rt::TestDb db;
  db.migrate();
  live_activity(db);
  // a reason holding an ANSI clear-screen and a newline that would forge a history row
  std::string evil = "paused\x1b[2J\nforged row";
  db.ok({"activity", "pause", "out", "--reason", evil});
  auto h = db.ok({"activity", "history", "out"});
  CHECK(h.out.find('\x1b') == std::string::npos);
  CHECK(h.out.find("paused\\x1b[2J\\nforged row") != std::string::npos);
  CHECK(h.out.find("\nforged row") == std::string::npos);
  // JSON keeps the exact text
  CHECK(db.ok({"activity", "history", "out", "-o", "json"}).out.find("\\u001b[2J\\nforged row") != std::string::npos);
  db.ok({"activity", "resume", "out"});

  // BIZ_ID is a padded column: a combining accent takes no column, a CJK character two. One user,
  // one claim a day (the template's limit), so the three grants share one table of width 7.
  std::vector<std::string> ids{"order-1", "cafx\xcc\x81", "\xe8\xae\xa2\xe5\x8d\x95"};
  for (size_t i = 0; i < ids.size(); ++i)
    db.ok({"claim", "out", "--user", "w", "--biz-id", ids[i]}, 0,
          {{"REWARDCTL_NOW", "2026-01-0" + std::to_string(i + 1) + "T12:00:00Z"}});
  auto all = db.ok({"record", "show", "--user", "w"}).out;
  INFO(all);
  CHECK(all.find("order-1  2026-01-01T12:00:00.000Z") != std::string::npos);
  CHECK(all.find("cafx\xcc\x81     2026-01-02") != std::string::npos);  // 4 columns + 3 + 2 spaces
  CHECK(all.find("\xe8\xae\xa2\xe5\x8d\x95     2026-01-03") != std::string::npos);
}

TEST_CASE("output: lint refuses C0 control characters in text fields") {
  auto t = rt::run({"activity", "new", "--kind", "direct"});
  REQUIRE(t.rc == 0);
  std::string def = t.out;
  auto at = def.find("name = \"");
  REQUIRE(at != std::string::npos);
  def.insert(at + 8, "\\u001b[31m");  // a TOML escape: the parsed name holds ESC
  std::string dir = rt::make_temp_dir();
  rt::write_file(dir, "c.toml", def);
  auto r = rt::run({"activity", "lint", dir + "/c.toml", "-o", "json"});
  CHECK(r.rc == 1);
  CHECK(r.out.find("\"code\":\"control_char\"") != std::string::npos);
  CHECK(r.out.find("\"path\":\"name\"") != std::string::npos);
  std::string rm = "rm -rf '" + dir + "'";
  (void)!system(rm.c_str());
}

TEST_CASE("output: a name echoed in an error or a log line cannot repaint the terminal or forge a line") {
  rt::TestDb db;
  db.migrate();
  std::string log = db.dir() + "/r.log";
  const std::string evil = "x\x1b[2J\nforged: line";
  // the error that ends a command, on stderr and in the log file
  auto show = db.ok({"activity", "show", evil, "--log-file", log}, 67);
  CHECK(show.err.find('\x1b') == std::string::npos);
  CHECK(show.err.find("x\\x1b[2J\\nforged: line") != std::string::npos);
  CHECK(rt::lines(show.err).size() == 1);
  std::string text = rt::read_file(log);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find("\nforged: line") == std::string::npos);
  // a parse-time error (an unknown command word) and bytes that are not UTF-8
  auto unk = db.ok({evil + "\xff"}, 64);
  CHECK(unk.err.find('\x1b') == std::string::npos);
  CHECK(unk.err.find("\\xff") != std::string::npos);
  CHECK(rt::lines(unk.err).size() == 1);
  // --log-format json keeps the text exact, escaped by JSON
  auto js = db.ok({"activity", "show", evil, "--log-format", "json"}, 67);
  REQUIRE(rt::lines(js.err).size() == 1);
  CHECK(json::parse(rt::lines(js.err)[0])["msg"].get<std::string>().find(evil) != std::string::npos);
}
