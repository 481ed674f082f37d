// Hostile definitions and hostile identifiers, on the backend under test: whatever `create`
// accepts, a claim can process; an identifier either side of the rules is refused at the edge
// (exit 64 for flags, a finding or a reject for files) with nothing written.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

std::string replaced(std::string t, const std::string& from, const std::string& to) {
  auto pos = t.find(from);
  REQUIRE_MESSAGE(pos != std::string::npos, "fixture lacks " << from);
  return t.replace(pos, from.size(), to);
}

int64_t written(const TestDb& db) {
  return db.count("SELECT (SELECT count(*) FROM activity) + (SELECT count(*) FROM prize) + "
                  "(SELECT count(*) FROM stock)");
}

}  // namespace

TEST_CASE("hostile definitions: values the engine or the schema cannot hold are refused by create (65)") {
  TestDb db;
  db.migrate();
  Spec base;
  base.stock = 10;
  struct Case {
    const char* name;
    std::string text;
    const char* code;
  };
  const std::string lottery_tail =
      "[[prizes]]\ncode = \"big\"\nitem = \"thing\"\namount = 1\nstock = 10\nweight = 9223372036854775807\n"
      "[[prizes]]\ncode = \"thanks\"\nitem = \"thing\"\namount = 1\nstock = 10\nweight = 1\n"
      "[lottery]\nconsolation = \"thanks\"\n";
  Spec lot = base;
  lot.kind = "lottery";
  lot.custom_prizes = true;
  lot.extra = lottery_tail;
  std::vector<Case> cases = {
      {"more buckets than stock", replaced(definition(base), "stock_buckets = 1", "stock_buckets = 2000"),
       "buckets_over_max"},
      {"buckets above stock", replaced(definition(base), "stock_buckets = 1", "stock_buckets = 11"),
       "buckets_over_stock"},
      {"buckets beyond INTEGER", replaced(definition(base), "stock_buckets = 1", "stock_buckets = 3000000000"),
       "buckets_over_max"},
      {"validity_days at INT64_MAX",
       replaced(definition(base), "stock_buckets = 1", "stock_buckets = 1\nvalidity_days = 9223372036854775807"),
       "value_too_large"},
      {"weights beyond 64 bits", definition(lot), "value_too_large"},
      {"budget at INT64_MAX", replaced(definition(base), "kind = \"direct\"\n",
                                       "kind = \"direct\"\nbudget_cents = 9223372036854775807\n"),
       "value_too_large"},
  };
  for (auto& c : cases) {
    CAPTURE(c.name);
    auto f = write_file(db.dir(), "bad.toml", c.text);
    auto r = db.ok({"activity", "create", "-f", f, "--publish"}, 65, {{"REWARDCTL_REVIEW_REQUIRED", "false"}});
    CHECK(r.all().find(c.code) != std::string::npos);
    CHECK(written(db) == 0);
  }
}

TEST_CASE("hostile identifiers: claim refuses empty, blank, control, invalid UTF-8 and over-long ids (64)") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  struct Bad {
    const char* flag;
    std::string value;
    const char* says;
  };
  std::vector<Bad> bad = {
      {"--biz-id", "", "--biz-id is empty"},
      {"--user", "", "--user is empty"},
      {"--user", "   ", "--user is empty"},
      {"--user", "u\x01", "--user holds a control character"},
      {"--biz-id", "b\x1b[2J", "--biz-id holds a control character"},
      {"--user", "u\xff\xfe", "--user is not valid UTF-8"},
      {"--biz-id", "b\xc3", "--biz-id is not valid UTF-8"},
      {"--user", std::string(8000, 'u'), "--user is 8000 bytes, at most 64"},
      {"--biz-id", std::string(8000, 'b'), "--biz-id is 8000 bytes, at most 128"},
  };
  for (auto& b : bad) {
    CAPTURE(b.says);
    std::vector<std::string> args{"claim", "act", "--user", "u1", "--biz-id", "b1"};
    args[b.flag == std::string("--user") ? 3 : 5] = b.value;
    auto r = db.ok(args, 64);
    CHECK(r.err.find(b.says) != std::string::npos);
    args.push_back("--dry-run");
    db.ok(args, 64);
  }
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
  CHECK(db.count("SELECT count(*) FROM limit_counter") == 0);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant'") == 0);

  // the longest valid ids, and ids that only need trimming, are granted on both backends
  auto ok = db.ok({"claim", "act", "--user", std::string(64, 'u'), "--biz-id", std::string(128, 'b'), "-o", "json"});
  CHECK(json::parse(ok.out)["outcome"] == "granted");
  auto trimmed = db.ok({"claim", "act", "--user", " 用户一 ", "--biz-id", "\tb2 ", "-o", "json"});
  auto j = json::parse(trimmed.out);
  CHECK(j["user"] == "用户一");
  CHECK(j["biz_id"] == "b2");
  CHECK(db.count("SELECT count(*) FROM grants WHERE user_id = $1 AND biz_id = 'b2'", {std::string("用户一")}) == 1);
}

TEST_CASE("hostile identifiers: lookups by user, biz id or request id apply the same rules (64)") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  db.ok({"record", "show", "--user", "u\xff"}, 64);
  db.ok({"record", "show", "--biz-id", std::string(8000, 'b')}, 64);
  db.ok({"ledger", "balance", "\x01"}, 64);
  db.ok({"ledger", "entries", std::string(65, 'u')}, 64);
  db.ok({"qualification", "show", "act", "  "}, 64);
  auto g = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1", "-o", "json"});
  std::string code = json::parse(g.out)["record_code"];
  db.ok({"reverse", code, "--reason", "test", "--request-id", std::string(8000, 'r')}, 64);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 1);
}

TEST_CASE("hostile identifiers: a definition's gray list and blacklist are checked like a claim's --user") {
  TestDb db;
  db.migrate();
  Spec s;
  s.gray = "\"" + std::string(8000, 'g') + "\"";  // PostgreSQL: over the btree row limit
  auto f = write_file(db.dir(), "a.toml", definition(s));
  auto r = db.ok({"activity", "create", "-f", f}, 65);
  CHECK(r.all().find("bad_user_id") != std::string::npos);
  s.gray.clear();
  s.black = "\"\\u0007bell\"";
  db.ok({"activity", "create", "-f", write_file(db.dir(), "b.toml", definition(s))}, 65);
  CHECK(written(db) == 0);
}

TEST_CASE("hostile identifiers: CSV rows with bad user ids are rejects naming the rule, the rest imports") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  std::string csv = "user_id\nu1\n" + std::string(8000, 'x') + "\n\"a\x01" "b\"\n\xff\xfe\n\"   \"\nu2\n";
  auto f = write_file(db.dir(), "q.csv", csv);
  auto r = db.rc({"import-qualifications", "act", f, "--max-rejects", "10", "-o", "json"});
  INFO(r.all());
  CHECK(r.rc == 3);
  CHECK(db.count("SELECT count(*) FROM qualification") == 2);
  std::string rej = read_file(f + ".rejects.csv");
  CHECK(rej.find("user_id is 8000 bytes, at most 64") != std::string::npos);
  CHECK(rej.find("user_id holds a control character") != std::string::npos);
  CHECK(rej.find("user_id is not valid UTF-8") != std::string::npos);
  CHECK(rej.find("user_id is empty") != std::string::npos);
}
