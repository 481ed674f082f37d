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

// Identifiers that would be disguised (docs/design.md §4.1): invisible characters and text not in NFC.
namespace {
const std::string kZwsp = "\xE2\x80\x8B";        // U+200B ZERO WIDTH SPACE
const std::string kRlo = "\xE2\x80\xAE";         // U+202E RIGHT-TO-LEFT OVERRIDE
const std::string kTagA = "\xF3\xA0\x81\x81";    // U+E0041 TAG LATIN CAPITAL LETTER A
const std::string kCafeNfc = "caf\xC3\xA9";      // café, U+00E9
const std::string kCafeNfd = "cafe\xCC\x81";     // café, e + U+0301

int64_t claim_rows(const TestDb& db) {
  return db.count("SELECT (SELECT count(*) FROM grants) + (SELECT count(*) FROM limit_counter) + "
                  "(SELECT count(*) FROM status_log WHERE entity = 'grant') + (SELECT count(*) FROM ledger_entry)");
}
}  // namespace

TEST_CASE("disguised identifiers: claim refuses invisible characters and text not in NFC (64), nothing written") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  struct Bad {
    const char* flag;
    std::string value;
    std::string says;
  };
  std::vector<Bad> bad = {
      {"--user", "evil" + kZwsp, "--user holds an invisible character U+200B at character 5 (byte 4)"},
      {"--user", kZwsp, "--user holds an invisible character U+200B at character 1 (byte 0)"},
      {"--user", " " + kZwsp + " ", "--user holds an invisible character U+200B at character 1 (byte 0)"},
      {"--user", "ab" + kRlo + "cd", "--user holds an invisible character U+202E at character 3 (byte 2)"},
      {"--user", "u" + kTagA, "--user holds an invisible character U+E0041 at character 2 (byte 1)"},
      {"--user", kCafeNfd,
       "--user is not in Unicode NFC (character 4, byte 3, U+0301 combines with what precedes it; send the composed form)"},
      {"--biz-id", "b1" + kZwsp, "--biz-id holds an invisible character U+200B at character 3 (byte 2)"},
      {"--biz-id", "order-" + kCafeNfd, "--biz-id is not in Unicode NFC (character 10, byte 9, U+0301 combines"},
  };
  for (auto& b : bad) {
    CAPTURE(b.says);
    std::vector<std::string> args{"claim", "act", "--user", "u1", "--biz-id", "b1"};
    args[b.flag == std::string("--user") ? 3 : 5] = b.value;
    auto r = db.ok(args, 64);
    CHECK(r.err.find(b.says) != std::string::npos);
    CHECK(r.err.find("see IDENTIFIERS in rewardctl(1)") != std::string::npos);
    args.push_back("--dry-run");
    db.ok(args, 64);
  }
  CHECK(claim_rows(db) == 0);

  // `evil` is one user: once it has claimed, evil + U+200B is still refused, not a second user
  auto evil = json::parse(db.ok({"claim", "act", "--user", "evil", "--biz-id", "b-evil", "-o", "json"}).out);
  CHECK(evil["outcome"] == "granted");
  db.ok({"claim", "act", "--user", "evil" + kZwsp, "--biz-id", "b-evil2"}, 64);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  // NFC text of any script is granted and stored byte for byte as sent
  for (const std::string& u : {kCafeNfc, std::string("用户一"), std::string("u-2_b.c@example.com")}) {
    CAPTURE(u);
    auto j = json::parse(db.ok({"claim", "act", "--user", u, "--biz-id", "b-" + u, "-o", "json"}).out);
    CHECK(j["outcome"] == "granted");
    CHECK(j["user"] == u);
    CHECK(db.count("SELECT count(*) FROM grants WHERE user_id = $1 AND biz_id = $2", {u, "b-" + u}) == 1);
  }
  CHECK(db.count("SELECT count(*) FROM grants") == 4);
}

TEST_CASE("disguised identifiers: lookups, reverse --request-id and --operator apply the same rules (64)") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  auto g = db.ok({"claim", "act", "--user", kCafeNfc, "--biz-id", "b1", "-o", "json"});
  std::string code = json::parse(g.out)["record_code"];
  CHECK(db.ok({"record", "show", "--user", kCafeNfd}, 64).err.find("--user is not in Unicode NFC") != std::string::npos);
  db.ok({"record", "show", "--biz-id", "b1" + kZwsp}, 64);
  db.ok({"ledger", "balance", kCafeNfd}, 64);
  db.ok({"ledger", "entries", kZwsp}, 64);
  db.ok({"qualification", "show", "act", "u" + kRlo}, 64);
  auto r = db.ok({"reverse", code, "--reason", "test", "--request-id", "r" + kZwsp, "--yes"}, 64);
  CHECK(r.err.find("--request-id holds an invisible character U+200B at character 2 (byte 1)") != std::string::npos);
  auto op = db.ok({"reverse", code, "--reason", "test", "--yes", "--operator", "alice" + kZwsp}, 64);
  CHECK(op.err.find("the operator name holds an invisible character U+200B") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND to_state = 'reversed'") == 0);
  // the NFC spelling finds what was stored
  CHECK(json::parse(db.ok({"record", "show", "--user", kCafeNfc, "-o", "json"}).out)["user"] == kCafeNfc);
}

TEST_CASE("disguised identifiers: a definition's gray list and blacklist refuse them (create 65, bad_user_id)") {
  TestDb db;
  db.migrate();
  struct Bad {
    const char* name;
    std::string gray, black, says;
  };
  // TOML escapes: the file itself is plain ASCII, the strings hold the code points
  std::vector<Bad> bad = {
      {"NFD in [blacklist]", "", "\"cafe\\u0301\"",
       "'blacklist.users[0]' is not in Unicode NFC (character 4, byte 3, U+0301 combines with what precedes it"},
      {"U+200B in [gray]", "\"ok\", \"evil\\u200b\"", "",
       "'gray.users[1]' holds an invisible character U+200B at character 5 (byte 4)"},
      {"only U+200B in [gray]", "\"\\u200b\"", "", "'gray.users[0]' holds an invisible character U+200B at character 1"},
      {"RLO in [blacklist]", "", "\"ab\\u202ecd\"", "'blacklist.users[0]' holds an invisible character U+202E"},
      {"a tag character in [blacklist]", "", "\"u\\U000E0041\"", "'blacklist.users[0]' holds an invisible character U+E0041"},
  };
  for (auto& b : bad) {
    CAPTURE(b.name);
    Spec s;
    s.gray = b.gray;
    s.black = b.black;
    auto f = write_file(db.dir(), "a.toml", definition(s));
    auto r = db.ok({"activity", "create", "-f", f, "--publish"}, 65, {{"REWARDCTL_REVIEW_REQUIRED", "false"}});
    CHECK(r.all().find("bad_user_id") != std::string::npos);
    CHECK(r.all().find(b.says) != std::string::npos);
    CHECK(r.all().find(f + ":") != std::string::npos);  // the file (and line) of the finding
    CHECK(written(db) == 0);
    CHECK(db.count("SELECT count(*) FROM activity_user_list") == 0);
  }
  // the NFC spelling is stored as written, and its NFD twin cannot claim around it
  Spec s;
  s.black = "\"caf\\u00e9\"";
  db.ok({"activity", "create", "-f", write_file(db.dir(), "ok.toml", definition(s)), "--publish"}, 0,
        {{"REWARDCTL_REVIEW_REQUIRED", "false"}});
  CHECK(db.count("SELECT count(*) FROM activity_user_list WHERE user_id = $1", {kCafeNfc}) == 1);
  auto blocked = json::parse(db.ok({"claim", "act", "--user", kCafeNfc, "--biz-id", "b1", "-o", "json"}, 1).out);
  CHECK(blocked["reason"] == "blacklisted");
  db.ok({"claim", "act", "--user", kCafeNfd, "--biz-id", "b2"}, 64);
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
}

TEST_CASE("disguised identifiers: activity blacklist/gray add refuse them from USER (64) and -f FILE (65)") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  const int64_t before = db.count("SELECT count(*) FROM activity_user_list");
  for (const char* list : {"blacklist", "gray"}) {
    CAPTURE(list);
    auto r = db.ok({"activity", list, "add", "act", "ok1", "evil" + kZwsp}, 64);
    CHECK(r.err.find("USER holds an invisible character U+200B at character 5 (byte 4)") != std::string::npos);
    db.ok({"activity", list, "add", "act", kCafeNfd}, 64);
    auto f = write_file(db.dir(), "l.csv", "user_id\nok1\n" + kCafeNfd + "\n");
    auto rf = db.ok({"activity", list, "add", "act", "-f", f}, 65);
    CHECK(rf.err.find(f + ":3: user_id is not in Unicode NFC (character 4, byte 3") != std::string::npos);
    CHECK(rf.err.find("nothing was changed") != std::string::npos);
  }
  CHECK(db.count("SELECT count(*) FROM activity_user_list") == before);
  CHECK(db.count("SELECT count(*) FROM change_request") == 0);
}

TEST_CASE("disguised identifiers: CSV rows with them are rejects naming line and rule, the rest imports") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  std::string csv = "user_id\nu1\nevil" + kZwsp + "\n" + kCafeNfd + "\n" + kZwsp + "\nab" + kRlo + "cd\nu" + kTagA + "\n" +
                    kCafeNfc + "\n用户一\n";
  auto f = write_file(db.dir(), "q.csv", csv);
  // over the default --max-rejects 0: exit 65 and nothing stored
  auto none = db.rc({"import-qualifications", "act", f});
  INFO(none.all());
  CHECK(none.rc == 65);
  CHECK(db.count("SELECT count(*) FROM qualification") == 0);
  auto r = db.rc({"import-qualifications", "act", f, "--max-rejects", "10", "-o", "json"});
  CHECK(r.rc == 3);
  CHECK(db.count("SELECT count(*) FROM qualification") == 3);
  CHECK(db.count("SELECT count(*) FROM qualification WHERE user_id IN ($1, $2, 'u1')", {kCafeNfc, std::string("用户一")}) == 3);
  std::string rej = read_file(f + ".rejects.csv");
  CHECK(rej.find(",3,user_id holds an invisible character U+200B at character 5 (byte 4)") != std::string::npos);
  CHECK(rej.find(",4,\"user_id is not in Unicode NFC (character 4, byte 3, U+0301 combines") != std::string::npos);  // quoted: it holds commas
  CHECK(rej.find(",5,user_id holds an invisible character U+200B at character 1 (byte 0)") != std::string::npos);
  CHECK(rej.find(",6,user_id holds an invisible character U+202E at character 3 (byte 2)") != std::string::npos);
  CHECK(rej.find(",7,user_id holds an invisible character U+E0041 at character 2 (byte 1)") != std::string::npos);
}
