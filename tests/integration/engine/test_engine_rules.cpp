// The claim rules one by one: activity state and window, gray list, whitelist, blacklist, fuse,
// limits per period in the activity's zone, idempotency, lottery, redpack, reversal, outbox.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;
using rc::parse_rfc3339;
using rc::engine::Status;

static rc::Millis at(const char* s) { return *parse_rfc3339(s); }

TEST_CASE("engine: activity state and window decide first") {
  TestDb db;
  db.migrate();
  Spec s;
  s.start = "2027-03-01T00:00:00+08:00";
  s.end = "2027-03-31T23:59:59+08:00";
  seed(db, s);
  SUBCASE("not_found") {
    auto b = engine(db, at("2027-03-10T00:00:00Z"));
    CHECK(claim(*b.engine, "nope", "u", "b").reason == rc::engine::Reason::not_found);
  }
  SUBCASE("not_started / live / ended at the edges of a window ending 23:59:59+08:00") {
    auto b = engine(db, at("2027-02-28T15:59:59Z"));
    CHECK(claim(*b.engine, "act", "u", "b0").reason == rc::engine::Reason::not_started);
    b = engine(db, at("2027-03-31T15:59:58Z"));
    CHECK(claim(*b.engine, "act", "u", "b1").status == Status::granted);
    b = engine(db, at("2027-03-31T16:00:00Z"));
    CHECK(claim(*b.engine, "act", "u", "b2").reason == rc::engine::Reason::ended);
  }
  SUBCASE("paused, then not_live after offline") {
    auto now = std::map<std::string, std::string>{{"REWARDCTL_NOW", "2027-03-10T00:00:00Z"}};
    db.ok({"activity", "pause", "act"}, 0, now);
    auto b = engine(db, at("2027-03-10T00:00:00Z"));
    CHECK(claim(*b.engine, "act", "u", "b1").reason == rc::engine::Reason::paused);
    db.ok({"activity", "offline", "act", "--reason", "test", "--yes"}, 0, now);
    CHECK(claim(*b.engine, "act", "u", "b2").reason == rc::engine::Reason::not_live);
    CHECK(db.count("SELECT count(*) FROM grants") == 0);
  }
}

TEST_CASE("engine: an activity under review is not live") {
  TestDb db;
  db.migrate();
  Spec s;
  std::string f = write_file(db.dir(), "a.toml", definition(s));
  db.ok({"activity", "create", "-f", f, "--operator", "alice"});
  auto b = engine(db);
  CHECK(claim(*b.engine, "act", "u", "b").reason == rc::engine::Reason::not_live);
}

TEST_CASE("engine: gray list, whitelist, blacklist and fuse") {
  TestDb db;
  db.migrate();
  SUBCASE("gray: only the gray list may claim while gray") {
    Spec s;
    s.gray = "\"qa\"";
    std::string f = write_file(db.dir(), "a.toml", definition(s));
    db.ok({"activity", "create", "-f", f, "--operator", "alice"});
    db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
    db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
    db.ok({"activity", "publish", "act", "--gray"});
    auto b = engine(db);
    CHECK(claim(*b.engine, "act", "someone", "b1").reason == rc::engine::Reason::not_in_gray_list);
    CHECK(claim(*b.engine, "act", "qa", "b2").status == Status::granted);
    db.ok({"activity", "publish", "act", "--full"});
    CHECK(claim(*b.engine, "act", "someone", "b3").status == Status::granted);
  }
  SUBCASE("whitelist: qualified once, used, revoked") {
    Spec s;
    s.whitelist = true;
    seed(db, s);
    auto st = db.open();
    int64_t aid = db.count("SELECT id FROM activity WHERE code = 'act'");
    st->exec("INSERT INTO qualification (activity_id, user_id, status, created_at, updated_at) VALUES ($1, 'q1', 'unused', 0, 0)", {aid});
    st->exec("INSERT INTO qualification (activity_id, user_id, status, created_at, updated_at) VALUES ($1, 'q2', 'revoked', 0, 0)", {aid});
    auto b = engine(db);
    CHECK(claim(*b.engine, "act", "nobody", "b0").reason == rc::engine::Reason::not_qualified);
    CHECK(claim(*b.engine, "act", "q2", "b1").reason == rc::engine::Reason::not_qualified);
    CHECK(claim(*b.engine, "act", "q1", "b2").status == Status::granted);
    CHECK(claim(*b.engine, "act", "q1", "b3").reason == rc::engine::Reason::qualification_used);
    CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'used'") == 1);
    CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'qualification' AND to_state = 'used'") == 1);
  }
  SUBCASE("blacklist") {
    Spec s;
    s.black = "\"bad\"";
    seed(db, s);
    auto b = engine(db);
    CHECK(claim(*b.engine, "act", "bad", "b1").reason == rc::engine::Reason::blacklisted);
    CHECK(db.count("SELECT count(*) FROM grants") == 0);
  }
  SUBCASE("a blocked prize holds the request") {
    seed(db, Spec{});
    db.open()->exec("UPDATE prize SET blocked = 1");
    auto b = engine(db);
    CHECK(claim(*b.engine, "act", "u", "b1").reason == rc::engine::Reason::held_by_fuse);
    CHECK(db.count("SELECT SUM(remain) FROM stock") == 100);
  }
}

TEST_CASE("engine: a day limit resets at midnight in the activity's zone, not UTC") {
  TestDb db;
  db.migrate();
  Spec s;
  s.limit = 1;
  s.period = "day";
  seed(db, s);
  // 23:59 and 23:59:30 on Nov 30 in Shanghai are 15:59Z; 00:01 Dec 1 Shanghai is 16:01Z (still Nov 30 UTC).
  auto b = engine(db, at("2026-11-30T15:59:00Z"));
  CHECK(claim(*b.engine, "act", "u", "b1").status == Status::granted);
  b = engine(db, at("2026-11-30T15:59:30Z"));
  CHECK(claim(*b.engine, "act", "u", "b2").reason == rc::engine::Reason::limit_reached);
  b = engine(db, at("2026-11-30T16:01:00Z"));
  CHECK(claim(*b.engine, "act", "u", "b3").status == Status::granted);
  b = engine(db, at("2026-11-30T23:00:00Z"));
  CHECK(claim(*b.engine, "act", "u", "b4").reason == rc::engine::Reason::limit_reached);
  CHECK(db.count("SELECT count(*) FROM limit_counter") == 2);
  CHECK(db.count("SELECT count(*) FROM limit_counter WHERE period_key = '2026-12-01'") == 1);
}

TEST_CASE("engine: idempotency - a replay changes nothing, a reused biz_id is refused") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  auto b = engine(db);
  auto first = claim(*b.engine, "act", "u1", "biz");
  REQUIRE(first.status == Status::granted);
  int64_t logs = db.count("SELECT count(*) FROM status_log");
  auto again = claim(*b.engine, "act", "u1", "biz");
  CHECK(again.status == Status::replayed);
  CHECK(again.grant->record_code == first.grant->record_code);
  auto other = claim(*b.engine, "act", "u2", "biz");
  CHECK(other.reason == rc::engine::Reason::biz_id_conflict);
  CHECK_FALSE(other.grant);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log") == logs);
  CHECK(db.count("SELECT SUM(remain) FROM stock") == 99);
}

TEST_CASE("engine: lottery guarantees and sold-out degradation to the consolation prize") {
  TestDb db;
  db.migrate();
  Spec s;
  s.kind = "lottery";
  s.custom_prizes = true;
  s.unit_cost = 0;
  s.extra =
      "[items.big]\nkind = \"coupon\"\nunit_cost_cents = 500\nchannel = \"ledger\"\n"
      "[[prizes]]\ncode = \"big\"\nitem = \"big\"\namount = 1\nstock = 1\nweight = 1\n"
      "[[prizes]]\ncode = \"thanks\"\nitem = \"thing\"\namount = 1\nstock = 100000\nweight = 1000000\n"
      "[lottery]\nconsolation = \"thanks\"\n[[lottery.guarantees]]\nnth = 3\nprize = \"big\"\n";
  seed(db, s);
  auto b = engine(db);
  // Draws 1 and 2 of u1 are (almost surely) consolation; draw 3 is guaranteed big.
  std::vector<rc::engine::ClaimOutcome> o;
  for (int i = 1; i <= 3; ++i) o.push_back(claim(*b.engine, "act", "u1", "d" + std::to_string(i)));
  CHECK(o[2].grant->prize == "big");
  CHECK_FALSE(o[2].grant->draw_value);  // a guarantee is not a random draw
  CHECK(o[0].grant->draw_value);
  CHECK(o[0].grant->pool_version == 1);
  // u2's 3rd draw is guaranteed big too, but big is sold out: it degrades and says so.
  for (int i = 1; i <= 3; ++i) o.push_back(claim(*b.engine, "act", "u2", "e" + std::to_string(i)));
  CHECK(o[5].status == Status::granted);
  CHECK(o[5].grant->prize == "thanks");
  CHECK(o[5].grant->degraded_from == std::optional<std::string>("big"));
  CHECK(db.count("SELECT count(*) FROM grants g JOIN prize p ON p.id = g.prize_id WHERE p.code = 'big'") == 1);
  CHECK(db.count("SELECT count(*) FROM grants WHERE degraded_from IS NOT NULL") >= 1);
  CHECK(db.count("SELECT remain FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.code = 'big'") == 0);
}

TEST_CASE("engine: redpack amounts stay in range and never exceed the budget left") {
  TestDb db;
  db.migrate();
  seed(db, redpack(1000));
  auto b = engine(db);
  int64_t total = 0;
  int granted = 0;
  for (int i = 0; i < 20; ++i) {
    auto o = claim(*b.engine, "act", "u" + std::to_string(i), "b" + std::to_string(i));
    if (o.status == Status::granted) {
      ++granted;
      total += o.grant->amount;
      CHECK(o.grant->amount >= 100);
      CHECK(o.grant->amount <= 300);
    } else {
      CHECK(o.reason == rc::engine::Reason::budget_exhausted);
    }
  }
  CHECK(granted >= 3);
  CHECK(total <= 1000);
  CHECK(db.count("SELECT consumed_cents FROM budget") == total);
  CHECK(db.count("SELECT COALESCE(SUM(amount), 0) FROM grants") == total);
  CHECK(1000 - total < 100);  // stopped only when less than the minimum packet was left
}

TEST_CASE("engine: a redpack range stored from 0 never grants an empty packet, nor one after the budget is spent") {
  TestDb db;
  db.migrate();
  seed(db, redpack(10, 1, 3));
  // as a definition stored before lint refused a range from 0 (redpack_range) would have it
  db.open()->exec("UPDATE prize SET amount = 0 WHERE code = 'pack'");
  rc::engine::EngineOptions o;
  int64_t draws = 0;
  o.draw_below = [&](int64_t total) {
    CHECK(total == 3);  // 1, 2 or 3 cents: the range starts at 1
    ++draws;
    return int64_t(0);  // the smallest packet every time
  };
  auto b = engine(db, std::nullopt, o);
  for (int i = 0; i < 10; ++i) {
    auto g = claim(*b.engine, "act", "u" + std::to_string(i), "b" + std::to_string(i));
    REQUIRE(g.status == Status::granted);
    CHECK(g.grant->amount == 1);
  }
  CHECK(db.count("SELECT consumed_cents FROM budget") == 10);
  for (int k = 0; k < 3; ++k) {
    auto g = claim(*b.engine, "act", "late" + std::to_string(k), "late" + std::to_string(k));
    CHECK(g.status == Status::rejected);
    CHECK(g.reason == rc::engine::Reason::budget_exhausted);
  }
  CHECK(draws == 13);  // once per claim, on both paths
  CHECK(db.count("SELECT count(*) FROM grants") == 10);  // nothing written for the late ones
  CHECK(db.count("SELECT count(*) FROM grants WHERE amount < 1") == 0);
  CHECK(db.count("SELECT sum(amount) FROM grants") == 10);
}

TEST_CASE("engine: a redpack stored as a fixed 0 or a range [0, 0] is never granted, on either path") {
  for (const char* shape : {"range", "fixed"}) {
    CAPTURE(shape);
    TestDb db;
    db.migrate();
    seed(db, redpack(10, 1, 3));
    // as definitions stored before lint refused them (redpack_range) would have them
    db.open()->exec(std::string("UPDATE prize SET amount = 0, amount_max = ") +
                    (std::string(shape) == "range" ? "0" : "NULL") + " WHERE code = 'pack'");
    auto b = engine(db);
    for (int i = 0; i < 3; ++i) {
      auto g = claim(*b.engine, "act", "u" + std::to_string(i), "b" + std::to_string(i));
      CHECK(g.status == Status::rejected);
      CHECK(g.reason == rc::engine::Reason::budget_exhausted);
    }
    // and with the budget spent (PostgreSQL's one statement took a packet costing 0 past it before)
    db.open()->exec("UPDATE budget SET consumed_cents = authorised_cents");
    CHECK(claim(*b.engine, "act", "late", "late").reason == rc::engine::Reason::budget_exhausted);
    CHECK(db.count("SELECT count(*) FROM grants") == 0);
    CHECK(db.count("SELECT sum(remain) FROM stock") == 100);
    db.open()->exec("UPDATE budget SET consumed_cents = 0");  // (the books as they were, for the oracle)
  }
}

TEST_CASE("engine: reversal returns stock, limit and budget once, twice = once") {
  TestDb db;
  db.migrate();
  Spec s;
  s.limit = 1;
  s.budget = 10000;
  seed(db, s);
  auto b = engine(db);
  auto o = claim(*b.engine, "act", "u1", "b1");
  REQUIRE(o.status == Status::granted);
  CHECK(o.grant->state == rc::GrantState::success);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 100);
  auto r1 = db.ok({"reverse", o.grant->record_code, "--reason", "refund", "--request-id", "k1", "--yes", "-o", "json"});
  CHECK(json::parse(r1.out)["changed"] == true);
  auto r2 = db.ok({"reverse", o.grant->record_code, "--reason", "refund", "--request-id", "k1", "--yes", "-o", "json"});
  CHECK(json::parse(r2.out)["replayed"] == true);
  db.ok({"reverse", o.grant->record_code, "--reason", "refund", "--request-id", "k2", "--yes"}, 1);
  CHECK(db.count("SELECT SUM(remain) FROM stock") == 100);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 0);
  CHECK(db.count("SELECT used FROM limit_counter") == 0);
  CHECK(db.count("SELECT balance FROM ledger_account") == 0);
  CHECK(db.count("SELECT count(*) FROM ledger_entry WHERE kind = 'reverse'") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND to_state = 'reversed'") == 1);
  // the returned limit lets the user claim again
  CHECK(claim(*b.engine, "act", "u1", "b2").status == Status::granted);
}

TEST_CASE("engine: outbox delivery waits for record complete") {
  TestDb db;
  db.migrate();
  Spec s;
  s.channel = "outbox";
  s.item_kind = "physical";
  seed(db, s);
  auto r = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1", "-o", "json"});
  auto j = json::parse(r.out);
  CHECK(j["outcome"] == "granted");
  CHECK(j["state"] == "awaiting_external");
  std::string bill = j["bill_no"];
  CHECK(db.count("SELECT count(*) FROM outbox WHERE state = 'pending'") == 1);
  db.ok({"record", "complete", bill, "--failed"}, 64);
  db.ok({"record", "complete", bill, "--ok", "--dry-run"});
  CHECK(db.count("SELECT count(*) FROM outbox WHERE state = 'pending'") == 1);
  db.ok({"record", "complete", bill, "--ok"});
  db.ok({"record", "complete", bill, "--ok"}, 1);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 1);
  CHECK(db.count("SELECT count(*) FROM outbox WHERE state = 'done'") == 1);
  // delivered outside the database: reversed only when the operator says the downstream took it back
  std::string rec = j["record_code"];
  auto r1 = db.ok({"reverse", rec, "--reason", "returned", "--yes"}, 1);
  CHECK(r1.err.find("--downstream-reversed") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 1);
  db.ok({"reverse", rec, "--reason", "returned", "--downstream-reversed", "--yes"});
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'reversed'") == 1);
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'grant.reverse' AND detail LIKE '%\"downstream_reversed\":true%'") == 1);
}

TEST_CASE("engine: a channel this host does not configure refuses the claim before anything is written") {
  TestDb db;
  db.migrate();
  Spec s;
  s.channel = "wallet";
  std::string cfg = write_file(db.dir(), "c.toml",
                               "[channels.wallet]\ntype = \"webhook\"\nurl = \"http://127.0.0.1:9/x\"\nsecret = \"env:S\"\n");
  seed(db, s, {{"REWARDCTL_CONFIG", cfg}});
  auto r = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1"}, 78);  // this host has no [channels.wallet]
  CHECK(r.err.find("[channels.wallet]") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
  CHECK(db.count("SELECT SUM(remain) FROM stock") == 100);
}

TEST_CASE("cli: claim prints the outcome, a rejection exits 1 with its reason on stdout") {
  TestDb db;
  db.migrate();
  Spec s;
  s.limit = 1;
  seed(db, s);
  auto g = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1", "--channel", "app", "-o", "json"});
  auto j = json::parse(g.out);
  CHECK(j["v"] == 1);
  CHECK(j["outcome"] == "granted");
  CHECK(j["source"] == "app");
  CHECK(j["state"] == "success");
  // the log line every claim leaves, on stderr: activity, user, biz_id, outcome, duration
  CHECK(g.err.find("claim activity=act user=u1 biz_id=b1 outcome=granted record=") != std::string::npos);
  CHECK(g.err.find("duration_us=") != std::string::npos);
  auto rp = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1", "-o", "json"});
  CHECK(json::parse(rp.out)["outcome"] == "replayed");
  CHECK(json::parse(rp.out)["record_code"] == j["record_code"]);
  auto rj = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b2", "-o", "json"}, 1);
  CHECK(json::parse(rj.out)["reason"] == "limit_reached");
  CHECK(rj.err.find("outcome=rejected reason=limit_reached") != std::string::npos);
  auto dry = db.ok({"claim", "act", "--user", "u2", "--biz-id", "b3", "--dry-run", "-o", "json"});
  CHECK(json::parse(dry.out)["dry_run"] == true);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  auto show = db.ok({"record", "show", "--user", "u1", "-o", "json"});
  CHECK(lines(show.out).size() == 1);
  CHECK(db.rc({"claim", "act", "--user", "u1"}).rc == 64);  // --biz-id is required
}
