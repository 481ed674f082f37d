// import-qualifications and qualification revoke|show|count through the real binary, on the
// backend under test: dirty inputs and their line numbers, idempotent reruns, the dry-run twin,
// standard input, and a batched import killed with SIGKILL and rerun.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "util/csv_reader.hpp"
#include "support/harness.hpp"

using nlohmann::json;
using rt::TestDb;

namespace {

// The activity command belongs to another suite: the row is written directly, with the status-log
// row of its creation (reconcile checks every activity has one).
void make_activity(const TestDb& db, const std::string& code) {
  auto st = db.open();
  st->exec(
      "INSERT INTO activity (code, name, kind, state, definition, definition_hash, timezone, start_at, end_at, "
      "created_by, created_at, updated_at) VALUES ($1, $1, 'direct', 'live', '{}', 'x', 'UTC', 0, 4102444800000, "
      "'test', 0, 0)",
      {code});
  st->exec(
      "INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, created_at) "
      "SELECT 'activity', id, NULL, 'live', 'test', 0 FROM activity WHERE code = $1",
      {code});
}

TestDb& fresh(TestDb& db) {
  db.migrate();
  make_activity(db, "act");
  return db;
}

int64_t qualified(const TestDb& db, const std::string& code = "act") {
  return db.count("SELECT count(*) FROM qualification q JOIN activity a ON a.id = q.activity_id WHERE a.code = $1",
                  {code});
}

// (line, error) of every row of a rejects file.
std::vector<std::pair<int64_t, std::string>> rejects(const std::string& path) {
  std::vector<std::pair<int64_t, std::string>> out;
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return out;
  rc::csv::Reader r(fd, path);
  rc::csv::Record rec;
  bool header = true;
  while (r.next(rec)) {
    if (header) {
      header = false;
      REQUIRE(rec.fields.size() >= 2);
      CHECK(rec.fields[rec.fields.size() - 2] == "_line");
      CHECK(rec.fields.back() == "_error");
      continue;
    }
    out.emplace_back(std::stoll(rec.fields[rec.fields.size() - 2]), rec.fields.back());
  }
  close(fd);
  return out;
}

bool exists(const std::string& p) { return access(p.c_str(), F_OK) == 0; }

struct Case {
  const char* name;
  std::string csv;
  std::vector<std::string> extra;  // options
  int rc;
  int64_t rows;                                         // qualifications afterwards
  std::vector<std::pair<int64_t, std::string>> rejected;  // (line, start of _error)
  std::string err;                                      // expected in stderr
};

}  // namespace

TEST_CASE("import: malformed and awkward inputs, each with its outcome and line numbers") {
  const std::string big(100 * 1024, 'x');
  const std::vector<Case> cases = {
      {"BOM and CRLF", "\xEF\xBB\xBFuser_id,tier\r\nu1,gold\r\nu2,silver\r\n", {}, 0, 2, {}, ""},
      {"quoted newline, then a malformed row", "user_id,note\nu1,\"two\nlines\"\nu2,x\nu3,\"a\"b\nu4,ok\n",
       {"--max-rejects", "1"}, 3, 3, {{5, "malformed quoting in field 2"}}, ""},
      {"NUL byte", std::string("user_id,tier\nu1,go") + '\0' + "ld\nu2,x\n", {"--max-rejects", "1"}, 3, 1,
       {{2, "field 'tier' holds a NUL byte"}}, ""},
      {"invalid UTF-8", "user_id,tier\nu\xff" "1,x\nu2,\xc3\x28\nu3,\xe7\x94\xa8\n", {"--max-rejects", "2"}, 3, 1,
       {{2, "user_id is not valid UTF-8"}, {3, "field 'tier' is not valid UTF-8"}}, ""},
      {"empty file", "", {}, 65, 0, {}, "in.csv:1: the file is empty"},
      {"header only", "user_id,tier\n", {}, 0, 0, {}, "read 0, inserted 0"},
      {"100 KB field kept, 100 KB user_id rejected", "user_id,blob\nu1," + big + "\n" + big + ",b\n",
       {"--max-rejects", "1"}, 3, 1, {{3, "user_id is 102400 bytes, at most 64"}}, ""},
      {"duplicate users over the default limit: nothing written", "user_id\nu1\nu2\nu1\nu3\nu1\n", {}, 65, 0,
       {{4, "duplicate user_id: first listed on line 2"}, {6, "duplicate user_id: first listed on line 2"}},
       "2 rows rejected, over --max-rejects 0"},
      {"duplicate users within the limit", "user_id\nu1\nu2\nu1\n", {"--max-rejects", "1"}, 3, 2,
       {{4, "duplicate user_id: first listed on line 2"}}, ""},
      {"spaces around values and header names", "user_id , tier\n  u1  ,  gold \n\" u2\t\",x\n\xe3\x80\x80u3,y\n",
       {}, 0, 3, {}, ""},
      {"extra and missing columns", "user_id,tier\nu1,gold,extra\nu2\nu3,ok\n", {"--max-rejects", "2"}, 3, 1,
       {{2, "3 fields, the header has 2 (extra columns)"}, {3, "1 field, the header has 2 (missing columns)"}}, ""},
      {"empty, blank and control-character user ids", "user_id,t\n,a\n   ,b\nu\x01x,c\nok,d\n", {"--max-rejects", "3"},
       3, 1, {{2, "user_id is empty"}, {3, "user_id is empty"}, {4, "user_id holds a control character"}}, ""},
      {"unterminated quote at the end", "user_id,tier\nu1,gold\nu2,\"never closed\nu3,x\n", {"--max-rejects", "100%"},
       65, 0, {}, "in.csv:3: unterminated quoted field"},
      {"no user_id column", "id,tier\n1,x\n", {}, 65, 0, {}, "in.csv:1: header: no user_id column"},
      {"a column named twice", "user_id,a,a\nu1,x,y\n", {}, 65, 0, {}, "column 'a' is named twice"},
  };
  for (const auto& c : cases) {
    SUBCASE(c.name) {
      TestDb db;
      fresh(db);
      std::string f = rt::write_file(db.dir(), "in.csv", c.csv);
      std::vector<std::string> args{"import-qualifications", "act", "in.csv", "-o", "json"};
      args.insert(args.end(), c.extra.begin(), c.extra.end());
      auto r = db.ok(args, c.rc);
      CHECK(qualified(db) == c.rows);
      if (!c.err.empty()) CHECK(r.err.find(c.err) != std::string::npos);
      auto rej = rejects(f + ".rejects.csv");
      REQUIRE(rej.size() == c.rejected.size());
      for (size_t i = 0; i < rej.size(); ++i) {
        CHECK(rej[i].first == c.rejected[i].first);
        CHECK(rej[i].second.rfind(c.rejected[i].second, 0) == 0);
      }
      if (c.rc == 65) {
        CHECK(db.count("SELECT count(*) FROM import_run") == 0);
        CHECK(db.count("SELECT count(*) FROM audit") == 0);
      }
    }
  }
}

TEST_CASE("import: disguised user ids (invisible characters, not NFC) are rejected rows naming line and rule") {
  const std::string nfc = "caf\xC3\xA9", nfd = "cafe\xCC\x81";
  const std::string csv = "user_id,tier\nu1,a\nevil\xE2\x80\x8B,b\n" + nfd + ",c\n\xE2\x80\x8B,d\nu\xF3\xA0\x81\x81,e\n" +
                          "ab\xE2\x80\xAE" "cd,f\n" + nfc + ",g\n\xE7\x94\xA8\xE6\x88\xB7\xE4\xB8\x80,h\n";
  const std::vector<std::pair<int64_t, std::string>> want = {
      {3, "user_id holds an invisible character U+200B at character 5 (byte 4)"},
      {4, "user_id is not in Unicode NFC (character 4, byte 3, U+0301 combines with what precedes it; send the composed form)"},
      {5, "user_id holds an invisible character U+200B at character 1 (byte 0)"},
      {6, "user_id holds an invisible character U+E0041 at character 2 (byte 1)"},
      {7, "user_id holds an invisible character U+202E at character 3 (byte 2)"}};
  TestDb db;
  fresh(db);
  std::string f = rt::write_file(db.dir(), "in.csv", csv);
  SUBCASE("over the default --max-rejects 0: exit 65, nothing written") {
    auto r = db.ok({"import-qualifications", "act", "in.csv"}, 65);
    CHECK(r.err.find("in.csv: 5 rows rejected, over --max-rejects 0") != std::string::npos);
    CHECK(qualified(db) == 0);
    CHECK(db.count("SELECT count(*) FROM import_run") == 0);
    CHECK(db.count("SELECT count(*) FROM audit") == 0);
    CHECK(rejects(f + ".rejects.csv") == want);
  }
  SUBCASE("within the limit: exit 3, the clean users stored as sent") {
    db.ok({"import-qualifications", "act", "in.csv", "--max-rejects", "5"}, 3);
    CHECK(qualified(db) == 3);
    CHECK(db.count("SELECT count(*) FROM qualification WHERE user_id IN ('u1', $1, $2)", {nfc, std::string("用户一")}) == 3);
    CHECK(rejects(f + ".rejects.csv") == want);
    // qualification revoke reads its file by the same rules
    rt::write_file(db.dir(), "rv.csv", "user_id\n" + nfd + "\n");
    db.ok({"qualification", "revoke", "act", "rv.csv", "--yes"}, 65);
    CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'revoked'") == 0);
    CHECK(rejects(db.dir() + "/rv.csv.rejects.csv") == std::vector<std::pair<int64_t, std::string>>{{2, want[1].second}});
  }
}

TEST_CASE("import: what is stored per row, and the audit and run records") {
  TestDb db;
  fresh(db);
  rt::write_file(db.dir(), "w.csv", "user_id,tier,note\nu1,gold,\"a, \"\"b\"\"\nc\"\n");
  auto r = db.ok({"import-qualifications", "act", "w.csv", "--source", "crm", "-o", "json", "--operator", "ann"});
  auto j = rt::last_json(r);
  CHECK(j["v"] == 1);
  CHECK(j["read"] == 1);
  CHECK(j["inserted"] == 1);
  auto s = db.open();
  auto q = s->query("SELECT status, source, import_id, import_line, ext FROM qualification WHERE user_id = 'u1'");
  REQUIRE(q.size() == 1);
  CHECK(q[0].str(0) == "unused");
  CHECK(q[0].str(1) == "crm");
  CHECK(q[0].str(2) == j["import_id"].get<std::string>());
  CHECK(q[0].i64(3) == 2);
  CHECK(json::parse(q[0].str(4)) == json{{"tier", "gold"}, {"note", "a, \"b\"\nc"}});
  CHECK(db.count("SELECT count(*) FROM import_run WHERE state = 'done' AND rows_committed = 1 AND inserted = 1") == 1);
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'qualification.import' AND operator = 'ann' "
                 "AND entity_key = 'act'") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'import_run' AND to_state = 'done'") == 1);

  auto show = db.ok({"qualification", "show", "act", "u1", "-o", "json"});
  auto sj = rt::last_json(show);
  CHECK(sj["status"] == "unused");
  CHECK(sj["import_line"] == 2);
  CHECK(sj["ext"]["tier"] == "gold");
  auto none = db.ok({"qualification", "show", "act", "nobody"}, 67);
  CHECK(none.err.find("has no qualification") != std::string::npos);
  db.ok({"qualification", "show", "nope", "u1"}, 67);
}

TEST_CASE("import: rerunning the same file adds nothing, users qualified before count as existing") {
  TestDb db;
  fresh(db);
  std::string body = "user_id\n";
  for (int i = 0; i < 50; ++i) body += "u" + std::to_string(i) + "\n";
  rt::write_file(db.dir(), "a.csv", body + "u7\n");
  auto r1 = rt::last_json(db.ok({"import-qualifications", "act", "a.csv", "-o", "json", "--max-rejects", "1"}, 3));
  CHECK(r1["inserted"] == 50);
  CHECK(r1["rejected"] == 1);
  auto r2 = rt::last_json(db.ok({"import-qualifications", "act", "a.csv", "-o", "json", "--max-rejects", "1"}, 3));
  CHECK(r2["inserted"] == 0);
  CHECK(r2["existing"] == 50);
  CHECK(r2["rejected"] == 1);  // the repeat is still a repeat, not a second "existing"
  CHECK(qualified(db) == 50);

  // a clean file imported twice: exit 0 both times, 0 rows the second time
  rt::write_file(db.dir(), "b.csv", "user_id\nu49\nu50\nu51\n");
  auto b1 = rt::last_json(db.ok({"import-qualifications", "act", "b.csv", "-o", "json"}));
  CHECK(b1["inserted"] == 2);
  CHECK(b1["existing"] == 1);
  auto b2 = rt::last_json(db.ok({"import-qualifications", "act", "b.csv", "-o", "json"}));
  CHECK(b2["inserted"] == 0);
  CHECK(b2["existing"] == 3);
  CHECK(qualified(db) == 52);
  CHECK_FALSE(exists(db.dir() + "/b.csv.rejects.csv"));
  CHECK(db.count("SELECT count(*) FROM import_seen") == 0);
}

TEST_CASE("import: a user qualified before and listed twice is existing once, then a duplicate") {
  TestDb db;
  fresh(db);
  rt::write_file(db.dir(), "first.csv", "user_id\nold\n");
  db.ok({"import-qualifications", "act", "first.csv"});
  rt::write_file(db.dir(), "again.csv", "user_id\nold\nnew1\nnew2\nold\n");
  for (std::string batch : {"0", "1", "2"}) {
    CAPTURE(batch);
    std::vector<std::string> args{"import-qualifications", "act", "again.csv", "-o", "json", "--max-rejects", "1"};
    if (batch != "0") args.insert(args.end(), {"--batch-size", batch});
    auto j = rt::last_json(db.ok(args, 3));
    CHECK(j["existing"] == 1);
    CHECK(j["inserted"] == 2);
    CHECK(j["rejected"] == 1);
    auto rej = rejects(db.dir() + "/again.csv.rejects.csv");
    REQUIRE(rej.size() == 1);
    CHECK(rej[0] == std::make_pair(int64_t(5), std::string("duplicate user_id: first listed on line 2")));
    db.open()->exec("DELETE FROM qualification WHERE user_id LIKE 'new%'");
  }
}

TEST_CASE("import: --dry-run reports the same counts and writes nothing") {
  TestDb db;
  fresh(db);
  rt::write_file(db.dir(), "pre.csv", "user_id\np1\np2\n");
  db.ok({"import-qualifications", "act", "pre.csv"});
  const int64_t audits = db.count("SELECT count(*) FROM audit"), runs = db.count("SELECT count(*) FROM import_run");
  std::string body = "user_id,tier\np1,x\n";
  for (int i = 0; i < 300; ++i) body += "d" + std::to_string(i % 250) + ",t\n";
  body += ",empty\n";
  rt::write_file(db.dir(), "d.csv", body);
  for (std::string batch : {"", "64"}) {
    CAPTURE(batch);
    std::vector<std::string> base{"import-qualifications", "act", "d.csv", "-o", "json", "--max-rejects", "20%"};
    if (!batch.empty()) base.insert(base.end(), {"--batch-size", batch});
    auto dry = base;
    dry.push_back("--dry-run");
    auto d = rt::last_json(db.ok(dry, 3));
    CHECK(d["dry_run"] == true);
    CHECK(d["read"] == 302);
    CHECK(d["inserted"] == 250);
    CHECK(d["existing"] == 1);
    CHECK(d["rejected"] == 51);
    CHECK(d["rejects_file"].is_null());
    CHECK(qualified(db) == 2);
    CHECK(db.count("SELECT count(*) FROM audit") == audits);
    CHECK(db.count("SELECT count(*) FROM import_run") == runs);
    CHECK_FALSE(exists(db.dir() + "/d.csv.rejects.csv"));
  }
  auto real = rt::last_json(db.ok({"import-qualifications", "act", "d.csv", "-o", "json", "--max-rejects", "20%"}, 3));
  CHECK(real["inserted"] == 250);
  CHECK(real["existing"] == 1);
  CHECK(real["rejected"] == 51);
  CHECK(qualified(db) == 252);
  CHECK(rejects(db.dir() + "/d.csv.rejects.csv").size() == 51);
  // a dry run over the limit fails the same way, still writing nothing
  db.ok({"import-qualifications", "act", "d.csv", "--dry-run", "--max-rejects", "1%"}, 65);
}

TEST_CASE("import: --max-rejects as a count and a percentage, bad options") {
  TestDb db;
  fresh(db);
  std::string body = "user_id\n";
  for (int i = 0; i < 19; ++i) body += "u" + std::to_string(i) + "\n";
  rt::write_file(db.dir(), "p.csv", body + ",\n");  // 20 rows, 1 rejected: 5%
  db.ok({"import-qualifications", "act", "p.csv", "--max-rejects", "4%"}, 65);
  CHECK(qualified(db) == 0);
  db.ok({"import-qualifications", "act", "p.csv", "--max-rejects", "5%"}, 3);
  CHECK(qualified(db) == 19);
  db.ok({"import-qualifications", "act", "p.csv", "--max-rejects", "abc"}, 64);
  db.ok({"import-qualifications", "act", "p.csv", "--max-rejects", "101%"}, 64);
  db.ok({"import-qualifications", "act", "p.csv", "--batch-size", "0"}, 64);
  db.ok({"import-qualifications", "act", "p.csv", "--progress", "loud"}, 64);
  auto missing = db.ok({"import-qualifications", "act", "nope.csv"}, 66);
  CHECK(missing.err.find("cannot open nope.csv") != std::string::npos);
  auto unknown = db.ok({"import-qualifications", "zzz", "p.csv"}, 67);
  CHECK(unknown.err.find("no activity 'zzz'") != std::string::npos);
}

TEST_CASE("import: standard input") {
  TestDb db;
  fresh(db);
  auto r = db.ok({"import-qualifications", "act", "-", "-o", "json", "--max-rejects", "1", "--progress", "plain"}, 3, {},
                 "user_id,tier\r\ns1,a\r\ns2,b\r\ns1,c\r\n");
  auto j = rt::last_json(r);
  CHECK(j["inserted"] == 2);
  CHECK(j["rejected"] == 1);
  CHECK(j["file"] == "-");
  auto rej = rejects(db.dir() + "/stdin.rejects.csv");
  REQUIRE(rej.size() == 1);
  CHECK(rej[0].first == 4);
  auto s = db.open()->query("SELECT source FROM qualification WHERE user_id = 's1'");
  CHECK(s[0].str(0) == "stdin");
  // batched from standard input, and a broken stream names <stdin>
  auto b = rt::last_json(db.ok({"import-qualifications", "act", "-", "-o", "json", "--batch-size", "1"}, 0, {},
                           "user_id\ns3\ns4\ns2\n"));
  CHECK(b["inserted"] == 2);
  CHECK(b["existing"] == 1);
  auto broken = db.ok({"import-qualifications", "act", "-"}, 65, {}, "user_id\n\"s9\n");
  CHECK(broken.err.find("<stdin>:2: unterminated quoted field") != std::string::npos);
  CHECK(qualified(db) == 4);
}

TEST_CASE("import: a rejects file, once fixed, imports again (_line and _error are ignored)") {
  TestDb db;
  fresh(db);
  rt::write_file(db.dir(), "r.csv", "user_id,tier\nu1,a\n,b\nu3\n");
  db.ok({"import-qualifications", "act", "r.csv", "--max-rejects", "2"}, 3);
  std::string rej = rt::read_file(db.dir() + "/r.csv.rejects.csv");
  CHECK(rej == "user_id,tier,_line,_error\n,b,3,user_id is empty\nu3,,4,\"1 field, the header has 2 (missing columns)\"\n");
  rt::write_file(db.dir(), "fixed.csv", "user_id,tier,_line,_error\nu2,b,3,user_id is empty\nu3,,4,fixed\n");
  db.ok({"import-qualifications", "act", "fixed.csv"});
  auto q = db.open()->query("SELECT ext FROM qualification WHERE user_id = 'u2'");
  REQUIRE(q.size() == 1);
  CHECK(q[0].str(0) == "{\"tier\":\"b\"}");
  // a clean rerun removes the stale rejects file of the earlier run
  rt::write_file(db.dir(), "r.csv", "user_id,tier\nu1,a\n");
  db.ok({"import-qualifications", "act", "r.csv"});
  CHECK_FALSE(exists(db.dir() + "/r.csv.rejects.csv"));
}

// Imports FILE into `act` in batches, SIGKILLs it once two batches are committed, reruns it, and
// checks the result against the same file imported in one transaction into `ref`.
static void kill_and_resume(const TestDb& db, const std::string& file, int64_t n) {
  auto ref = rt::last_json(db.ok({"import-qualifications", "ref", file, "-o", "json", "--max-rejects", "100%", "--rejects",
                              "ref.rejects.csv"}, 3));
  const std::string batch = "200";
  const int64_t before_run = qualified(db);
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(db.dir().c_str()) != 0) _exit(127);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    unsetenv("REWARDCTL_CONFIG");
    execl(REWARDCTL_BIN, REWARDCTL_BIN, "--db", db.url().c_str(), "import-qualifications", "act", file.c_str(),
          "--batch-size", batch.c_str(), "--max-rejects", "100%", "--progress", "none", (char*)nullptr);
    _exit(127);
  }
  int64_t committed = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    committed = db.count("SELECT coalesce(max(rows_committed), 0) FROM import_run WHERE state = 'running'");
    if (committed >= 2 * std::stoll(batch)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));  // it was killed mid-way, not finished
  const int64_t partial = qualified(db);
  CHECK(partial > before_run);
  CHECK(partial < qualified(db, "ref"));
  CHECK(db.count("SELECT count(*) FROM import_run WHERE state = 'running'") == 1);

  auto r = rt::last_json(db.ok({"import-qualifications", "act", file, "-o", "json", "--batch-size", batch,
                            "--max-rejects", "100%"}, 3));
  CHECK(r["resumed_from"].get<int64_t>() >= committed);
  CHECK(r["read"] == n);
  CHECK(r["inserted"] == ref["inserted"]);
  CHECK(r["existing"] == ref["existing"]);
  CHECK(r["rejected"] == ref["rejected"]);
  CHECK(qualified(db) == qualified(db, "ref"));
  CHECK(db.count("SELECT count(*) FROM (SELECT user_id FROM qualification GROUP BY activity_id, user_id "
                 "HAVING count(*) > 1) d") == 0);
  CHECK(db.count("SELECT count(*) FROM import_run WHERE state = 'running'") == 0);
  CHECK(db.count("SELECT count(*) FROM import_seen") == 0);
  // the rejects file holds each rejected row exactly once, as the one-transaction run found them
  auto a = rejects(db.dir() + "/" + file + ".rejects.csv"), b = rejects(db.dir() + "/ref.rejects.csv");
  CHECK(a.size() == size_t(ref["rejected"].get<int64_t>()));
  CHECK(a == b);
  // and a rerun of the finished file changes nothing
  auto again = rt::last_json(db.ok({"import-qualifications", "act", file, "-o", "json", "--batch-size", batch,
                                "--max-rejects", "100%"}, 3));
  CHECK(again["inserted"] == 0);
  CHECK(again["resumed_from"] == 0);
}

// n rows: repeats across batches (of new users and, when given, of users qualified before) and a
// few invalid rows.
static std::string big_file(int n) {
  std::string body = "user_id,tier\n";
  for (int i = 0; i < n; ++i) {
    if (i % 5000 == 4999) body += ",bad\n";
    else if (i % 1000 == 999) body += "k" + std::to_string((i / 3) * 97 % 97000) + ",again\n";
    else body += "k" + std::to_string(i) + ",t" + std::to_string(i % 7) + "\n";
  }
  return body;
}

TEST_CASE("import: a batched import killed with SIGKILL continues on rerun with no duplicate and no loss") {
  const int n = 60000;
  SUBCASE("into an empty activity") {
    TestDb db;
    fresh(db);
    make_activity(db, "ref");
    rt::write_file(db.dir(), "big.csv", big_file(n));
    kill_and_resume(db, "big.csv", n);
  }
  SUBCASE("into an activity holding users of an earlier import") {
    TestDb db;
    fresh(db);
    make_activity(db, "ref");
    std::string pre = "user_id\n";
    for (int i = 0; i < 1000; ++i) pre += "k" + std::to_string(i * 97) + "\n";
    rt::write_file(db.dir(), "pre.csv", pre);
    db.ok({"import-qualifications", "act", "pre.csv"});
    db.ok({"import-qualifications", "ref", "pre.csv"});
    rt::write_file(db.dir(), "big.csv", big_file(n));
    kill_and_resume(db, "big.csv", n);
  }
}

TEST_CASE("import: qualification revoke, its dry-run twin, and count") {
  TestDb db;
  fresh(db);
  rt::write_file(db.dir(), "all.csv", "user_id\nu1\nu2\nu3\nu4\nu5\n");
  db.ok({"import-qualifications", "act", "all.csv"});
  db.open()->exec("UPDATE qualification SET status = 'used' WHERE user_id = 'u4'");
  db.expect_damage();  // u4 is marked used by hand, without the claim that would have used it
  rt::write_file(db.dir(), "rv.csv", "user_id,why\nu1,x\nu2,x\nu3,x\nu4,x\nghost,x\n,x\nu1,again\n");
  auto dry = rt::last_json(db.ok({"qualification", "revoke", "act", "rv.csv", "--dry-run", "--max-rejects", "1", "-o", "json"},
                             3));
  CHECK(dry["revoked"] == 3);
  CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'revoked'") == 0);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'qualification'") == 0);
  CHECK_FALSE(exists(db.dir() + "/rv.csv.rejects.csv"));

  auto r = rt::last_json(db.ok({"qualification", "revoke", "act", "rv.csv", "--yes", "--max-rejects", "1", "--reason", "fraud",
                            "-o", "json", "--batch-size", "2"}, 3));
  CHECK(r["read"] == 7);
  CHECK(r["revoked"] == 3);
  CHECK(r["not_found"] == 1);
  CHECK(r["not_unused"] == 2);  // u4 is used, the second u1 is already revoked
  CHECK(r["rejected"] == 1);
  CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'revoked'") == 3);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'qualification' AND from_state = 'unused' "
                 "AND to_state = 'revoked' AND reason = 'fraud'") == 3);
  CHECK(db.count("SELECT count(*) FROM (SELECT entity_id FROM status_log WHERE entity = 'qualification' "
                 "GROUP BY entity_id HAVING count(*) > 1) d") == 0);
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'qualification.revoke'") == 1);
  CHECK(rejects(db.dir() + "/rv.csv.rejects.csv") == std::vector<std::pair<int64_t, std::string>>{{7, "user_id is empty"}});

  auto again = rt::last_json(db.ok({"qualification", "revoke", "act", "rv.csv", "--yes", "--max-rejects", "1", "-o", "json"}, 3));
  CHECK(again["revoked"] == 0);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'qualification'") == 3);

  auto c = rt::last_json(db.ok({"qualification", "count", "act", "-o", "json"}));
  CHECK(c == json{{"v", 1}, {"activity", "act"}, {"count", 5}});
  CHECK(rt::last_json(db.ok({"qualification", "count", "act", "--status", "revoked", "-o", "json"}))["count"] == 3);
  CHECK(rt::last_json(db.ok({"qualification", "count", "act", "--status", "unused", "-o", "json"}))["count"] == 1);
  db.ok({"qualification", "count", "act", "--status", "gone"}, 64);
  db.ok({"qualification", "count", "nope"}, 67);
}

TEST_CASE("import: two concurrent imports of the same file into an empty activity insert each user once") {
  TestDb db;
  fresh(db);
  std::string body = "user_id\n";
  for (int i = 0; i < 3000; ++i) body += "c" + std::to_string(i * 7919 % 100000) + "\n";
  rt::write_file(db.dir(), "c.csv", body);
  rt::Run a, b;
  std::thread t1([&] { a = db.rc({"import-qualifications", "act", "c.csv", "-o", "json", "--rejects", "a.csv"}); });
  std::thread t2([&] { b = db.rc({"import-qualifications", "act", "c.csv", "-o", "json", "--rejects", "b.csv"}); });
  t1.join();
  t2.join();
  INFO(a.all() << "\n" << b.all());
  REQUIRE(a.rc == 0);
  REQUIRE(b.rc == 0);
  auto ja = rt::last_json(a), jb = rt::last_json(b);
  CHECK(ja["inserted"].get<int64_t>() + jb["inserted"].get<int64_t>() == 3000);
  CHECK(ja["existing"].get<int64_t>() + jb["existing"].get<int64_t>() == 3000);
  CHECK(qualified(db) == 3000);
  CHECK(db.count("SELECT count(*) FROM import_run WHERE state = 'done'") == 2);
}

TEST_CASE("import: a batched re-import of existing users does work in proportion to the file, not file x batch") {
  // The statistics PostgreSQL plans the re-import with are taken before the first import's COPY
  // (qualification then held another activity's users only), as happens whenever a re-import
  // follows before autovacuum: the activity looks nearly empty.
  TestDb db;
  fresh(db);
  make_activity(db, "other");
  const int n = 20000;
  std::string small = "user_id\n", body = "user_id,tier\n";
  for (int i = 0; i < 1000; ++i) small += "o" + std::to_string(i) + "\n";
  for (int i = 0; i < n; ++i) body += "r" + std::to_string(i * 7919 % 1000003) + ",t" + std::to_string(i % 3) + "\n";
  rt::write_file(db.dir(), "small.csv", small);
  rt::write_file(db.dir(), "r.csv", body);
  db.ok({"import-qualifications", "other", "small.csv"});
  auto st = db.open();
  if (rt::is_pg()) {
    st->exec("ALTER TABLE qualification SET (autovacuum_enabled = false)");
    st->exec("ANALYZE qualification");
  }
  db.ok({"import-qualifications", "act", "r.csv"});
  // index entries of this test's qualification read so far (PostgreSQL's statistics, flushed when a
  // backend exits; other tests' schemas have their own)
  auto index_reads = [&] {
    return rt::is_pg() ? db.count("SELECT coalesce(sum(idx_tup_read), 0)::bigint FROM pg_stat_user_indexes "
                                  "WHERE relname = 'qualification' AND schemaname = current_schema()")
                       : 0;
  };
  const int64_t before = index_reads();
  auto r = rt::last_json(db.ok({"import-qualifications", "act", "r.csv", "--batch-size", "2000", "-o", "json"}));
  CHECK(r["read"] == n);
  CHECK(r["existing"] == n);
  CHECK(r["inserted"] == 0);
  CHECK(qualified(db) == n);
  CHECK(db.count("SELECT count(*) FROM import_seen") == 0);
  const int64_t reads = index_reads() - before;
  INFO("index entries read by the re-import: " << reads);
  // one unique-index probe per row (the conflict) and a margin; reading the activity's whole index
  // range once per batch is 10 x n more
  CHECK(reads <= 3 * n);
}

TEST_CASE("import: --expires-at and an expires_at column give qualifications an expiry that expire honours") {
  TestDb db;
  fresh(db);
  const std::map<std::string, std::string> at_import{{"REWARDCTL_NOW", "2030-01-01T00:00:00Z"}};
  // bad option values: exit 64, nothing written
  rt::write_file(db.dir(), "a.csv", "user_id\nu1\nu2\n");
  auto bad = db.ok({"import-qualifications", "act", "a.csv", "--expires-at", "2030-06-01"}, 64, at_import);
  CHECK(bad.err.find("--expires-at must be an RFC 3339 time") != std::string::npos);
  db.ok({"import-qualifications", "act", "a.csv", "--expires-at", ""}, 64, at_import);
  auto huge = db.ok({"import-qualifications", "act", "a.csv", "--expires-at", std::string(5000, '9')}, 64, at_import);
  CHECK(huge.err.size() < 400);  // the value is cut, not echoed whole
  auto past = db.ok({"import-qualifications", "act", "a.csv", "--expires-at", "2029-12-31T23:59:59Z"}, 64, at_import);
  CHECK(past.err.find("not in the future") != std::string::npos);
  CHECK(qualified(db) == 0);

  // the first import (PostgreSQL: COPY straight into the table) takes the option for every row
  db.ok({"import-qualifications", "act", "a.csv", "--expires-at", "2030-02-01T08:00:00+08:00"}, 0, at_import);
  const int64_t feb1 = 1896134400000;  // 2030-02-01T00:00:00Z
  CHECK(db.count("SELECT count(*) FROM qualification WHERE expires_at = $1", {feb1}) == 2);

  // a second import (PostgreSQL: through the staging table): the column wins, an empty cell takes the
  // option, a bad cell is a rejected row naming its line, and the column is not kept in ext
  rt::write_file(db.dir(), "b.csv",
                 "user_id,expires_at,tier\nu3,2030-03-01T00:00:00Z,gold\nu4,,gold\nu5,tomorrow,gold\n"
                 "u6,2029-01-01T00:00:00Z,gold\nu1,2031-01-01T00:00:00Z,gold\n");
  auto r = db.ok({"import-qualifications", "act", "b.csv", "--expires-at", "2030-04-01T00:00:00Z", "--max-rejects", "2",
                  "-o", "json"},
                 3, at_import);
  auto j = rt::last_json(r);
  CHECK(j["inserted"] == 2);
  CHECK(j["existing"] == 1);
  CHECK(j["rejected"] == 2);
  auto rej = rejects(db.dir() + "/b.csv.rejects.csv");
  REQUIRE(rej.size() == 2);
  CHECK(rej[0].first == 4);
  CHECK(rej[0].second.find("expires_at 'tomorrow' is not an RFC 3339 time") != std::string::npos);
  CHECK(rej[1].first == 5);
  CHECK(rej[1].second.find("not in the future") != std::string::npos);
  auto s = db.open();
  auto q = s->query("SELECT user_id, expires_at, ext FROM qualification ORDER BY user_id");
  REQUIRE(q.size() == 4);
  CHECK(q[0].i64(1) == feb1);           // u1 existed: it keeps its expiry
  CHECK(q[2].i64(1) == 1898553600000);  // u3: 2030-03-01T00:00:00Z from its cell
  CHECK(q[3].i64(1) == 1901232000000);  // u4: 2030-04-01T00:00:00Z from the option
  CHECK(json::parse(q[2].str(2)) == json{{"tier", "gold"}});
  CHECK(rt::last_json(db.ok({"qualification", "show", "act", "u3", "-o", "json"}))["expires_at"] == "2030-03-01T00:00:00.000Z");

  // expire at 2030-02-15 expires u1 and u2 (unused, past their expiry) and nothing else
  db.ok({"expire"}, 0, {{"REWARDCTL_NOW", "2030-02-15T00:00:00Z"}});
  CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'expired'") == 2);
  CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'expired' AND user_id IN ('u1', 'u2')") == 2);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'qualification' AND to_state = 'expired'") == 2);
}

TEST_CASE("import: import and revoke are jobs of the runner - pause switch, job_run rows with counts") {
  TestDb db;
  fresh(db);
  rt::write_file(db.dir(), "a.csv", "user_id\nu1\nu2\nu3\n");
  auto p = rt::last_json(db.ok({"import-qualifications", "act", "a.csv", "-o", "json"}, 0, {{"REWARDCTL_JOBS_PAUSED", "1"}}));
  CHECK(p["state"] == "paused");
  CHECK(p["reason"].get<std::string>().find("REWARDCTL_JOBS_PAUSED") != std::string::npos);
  CHECK(qualified(db) == 0);
  CHECK(db.count("SELECT count(*) FROM job_run") == 0);

  db.ok({"import-qualifications", "act", "a.csv"});
  CHECK(qualified(db) == 3);
  rt::write_file(db.dir(), "r.csv", "user_id\nu1\nnobody\n");
  db.ok({"qualification", "revoke", "act", "r.csv", "--reason", "fraud", "--yes"});
  auto s = db.open();
  auto runs = s->query("SELECT job, state, counts, exit_code FROM job_run ORDER BY id");
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].str(0) == "import-qualifications");
  CHECK(runs[0].str(1) == "done");
  CHECK(json::parse(runs[0].str(2))["inserted"] == 3);
  CHECK(runs[1].str(0) == "qualification-revoke");
  CHECK(json::parse(runs[1].str(2))["revoked"] == 1);
  CHECK(json::parse(runs[1].str(2))["not_found"] == 1);

  // a usage error records nothing; an over-limit file is a failed run with its message
  db.ok({"import-qualifications", "act", "a.csv", "--max-rejects", "lots"}, 64);
  CHECK(db.count("SELECT count(*) FROM job_run") == 2);
  rt::write_file(db.dir(), "bad.csv", "user_id\nu9\n\"\"\n");
  db.ok({"import-qualifications", "act", "bad.csv"}, 65);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE job = 'import-qualifications' AND state = 'failed' AND exit_code = 65 "
                 "AND error LIKE '%over --max-rejects%'") == 1);
  CHECK(qualified(db) == 3);
}
