// activity new makes a template usable without an editor: --code, --start (now allowed), --end or
// --days; a window rejection names the start or the end (issue 13, point 1).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "support/harness.hpp"

using nlohmann::json;

TEST_CASE("activity new: --code --start now --days gives a template that lints clean and can be claimed now") {
  rt::TestDb db;
  db.migrate();
  for (auto kind : {"direct", "lottery", "redpack"}) {
    CAPTURE(kind);
    std::string code = std::string("now_") + kind;
    auto t = db.ok({"activity", "new", "--kind", kind, "--code", code, "--start", "now", "--days", "3"},
                   0, {{"REWARDCTL_NOW", "2026-05-01T10:20:30.456Z"}});
    CHECK(t.out.find("code = \"" + code + "\"") != std::string::npos);
    CHECK(t.out.find("start = \"2026-05-01T18:20:30+08:00\"") != std::string::npos);  // the template's zone
    CHECK(t.out.find("end = \"2026-05-04T18:20:30+08:00\"") != std::string::npos);
    CHECK(t.out.find("# required") != std::string::npos);  // comments are kept
    rt::write_file(db.dir(), code + ".toml", t.out);
    db.ok({"activity", "lint", code + ".toml"});
  }
  // the lottery: created, reviewed, published, and a draw is granted right away
  std::map<std::string, std::string> now{{"REWARDCTL_NOW", "2026-05-01T10:21:00Z"}};
  db.ok({"activity", "create", "-f", "now_lottery.toml", "--operator", "alice"}, 0, now);
  db.ok({"activity", "approve", "now_lottery", "--as", "product", "--operator", "bob"}, 0, now);
  db.ok({"activity", "approve", "now_lottery", "--as", "tech", "--operator", "carol"}, 0, now);
  db.ok({"activity", "publish", "now_lottery", "--full"}, 0, now);
  auto c = json::parse(db.ok({"claim", "now_lottery", "--user", "u1", "--biz-id", "b1", "-o", "json"}, 0, now).out);
  CHECK(c["outcome"] == "granted");
  // after the window: rejected as ended, and the message names the end
  auto late = db.ok({"claim", "now_lottery", "--user", "u2", "--biz-id", "b2", "-o", "json"}, 1,
                    {{"REWARDCTL_NOW", "2026-05-05T00:00:00Z"}});
  auto lj = json::parse(late.out);
  CHECK(lj["reason"] == "ended");
  CHECK(lj["message"] == "the activity ended at 2026-05-04T18:20:30+08:00 (2026-05-04T10:20:30.000Z)");
}

TEST_CASE("activity new: an explicit window, and a claim before it names the start") {
  rt::TestDb db;
  db.migrate();
  auto t = db.ok({"activity", "new", "--kind", "redpack", "--code", "later", "--start", "2030-01-01T00:00:00+08:00",
                  "--end", "2030-02-01T00:00:00+08:00"});
  CHECK(t.out.find("start = \"2030-01-01T00:00:00+08:00\"") != std::string::npos);
  CHECK(t.out.find("end = \"2030-02-01T00:00:00+08:00\"") != std::string::npos);
  rt::write_file(db.dir(), "later.toml", t.out);
  db.ok({"activity", "create", "-f", "later.toml", "--operator", "alice"});
  db.ok({"activity", "approve", "later", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "later", "--as", "tech", "--operator", "carol"});
  db.ok({"activity", "publish", "later", "--full"});
  auto early = json::parse(db.ok({"claim", "later", "--user", "u1", "--biz-id", "e1", "-o", "json"}, 1).out);
  CHECK(early["reason"] == "not_started");
  CHECK(early["message"] == "the activity starts at 2030-01-01T00:00:00+08:00 (2029-12-31T16:00:00.000Z)");
  auto table = db.ok({"claim", "later", "--user", "u1", "--biz-id", "e2"}, 1);
  CHECK(table.out.find("starts at 2030-01-01T00:00:00+08:00") != std::string::npos);
}

TEST_CASE("activity new: bad flags are usage errors naming the flag, and nothing is printed") {
  auto bad = [](std::vector<std::string> args, const std::string& says) {
    args.insert(args.begin(), {"activity", "new", "--kind", "lottery"});
    auto r = rt::run(args);
    CAPTURE(says);
    CHECK(r.rc == 64);
    CHECK(r.out.empty());
    CHECK(r.err.find(says) != std::string::npos);
  };
  bad({"--start", "tomorrow"}, "--start 'tomorrow' is not a time with an offset");
  bad({"--start", "2030-01-01T00:00:00"}, "--start '2030-01-01T00:00:00'");
  bad({"--end", "soon"}, "--end 'soon'");
  bad({"--start", "2030-01-02T00:00:00Z", "--end", "2030-01-01T00:00:00Z"},
      "end 2030-01-01T08:00:00+08:00 is not after start 2030-01-02T08:00:00+08:00");
  bad({"--end", "2030-01-01T00:00:00Z", "--days", "3"}, "give --end or --days, not both");
  bad({"--days", "0"}, "--days");
  bad({"--code", "Has Spaces"}, "--code 'Has Spaces'");
  // huge values: a window the template cannot write, a code or a time echoed only in part
  bad({"--start", "9999-12-30T00:00:00Z", "--days", "2"},
      "--days: the window's end 10000-01-01T00:00:00.000Z cannot be written as an RFC 3339 time in Asia/Shanghai");
  bad({"--start", "0001-01-01T00:00:00Z", "--days", "2"}, "--start: the window's start 0001-01-01T00:00:00.000Z");
  bad({"--days", "36601"}, "--days");
  bad({"--days", "99999999999999999999"}, "--days");
  bad({"--days", "-1"}, "--days");
  bad({"--code", std::string(100000, 'a')}, "(100000 bytes): use 1 to 64");
  bad({"--code", std::string(65, 'a')}, "(65 bytes)");
  bad({"--start", std::string(5000, '9')}, "...' is not a time");
  bad({"--code", "bad\xff\x1b[2J"}, "--code 'bad\\xff\\x1b[2J'");  // not UTF-8, an escape: shown escaped
  // the last day that can be written, milliseconds dropped
  auto last = rt::run({"activity", "new", "--kind", "lottery", "--start", "9999-12-30T00:00:00.999Z", "--days", "1"});
  CHECK(last.rc == 0);
  CHECK(last.out.find("end = \"9999-12-31T08:00:00+08:00\"") != std::string::npos);
  // the template's own start with --days: the end moves, the start stays
  auto r = rt::run({"activity", "new", "--kind", "lottery", "--days", "1"});
  CHECK(r.rc == 0);
  CHECK(r.out.find("start = \"2027-11-01T00:00:00+08:00\"") != std::string::npos);
  CHECK(r.out.find("end = \"2027-11-02T00:00:00+08:00\"") != std::string::npos);
}
