// The one-statement claim (core/engine/claim_one.hpp): on PostgreSQL the common claim is one call of
// rewardctl_claim_one, one round trip; it writes exactly what the full flow writes for the same
// claim; a refusal inside it leaves nothing behind and the full flow answers; under concurrency it
// never oversells. On SQLite the same cases run through the full flow, so both backends must agree.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "core/activity/versions.hpp"
#include "core/embedded.hpp"
#include "core/engine/stock.hpp"
#include "support/fault_store.hpp"
#include "support/seed.hpp"

using namespace rt;

namespace {

const rc::Millis kNow = 1'800'000'000'000;  // 2027-01-15, inside the default window

rc::engine::ClaimRequest request(const std::string& user, const std::string& biz, bool deliver = true) {
  rc::engine::ClaimRequest r;
  r.activity = "act";
  r.user = user;
  r.biz_id = biz;
  r.source = "app";
  r.deliver = deliver;
  return r;
}

// Every row a claim wrote, without its own identity (ids, codes, user, bill number), as one text.
std::string rows_of(const TestDb& db, const std::string& biz) {
  auto st = db.open();
  std::string out;
  auto add = [&](const std::string& sql) {
    for (auto& row : st->query(sql, {biz}).rows) {
      for (size_t c = 0; c < row.cells.size(); ++c) out += (row.is_null(c) ? "NULL" : row.str(c)) + "|";
      out += "\n";
    }
    out += "--\n";
  };
  add("SELECT state, amount, cost_cents, bucket, draw_value, pool_version, degraded_from, bill_no IS NULL, channel, "
      "source, list_item_id, expires_at, reason, created_at, updated_at, activity_id, prize_id FROM grants "
      "WHERE biz_id = $1");
  add("SELECT l.from_state, l.to_state, l.actor, l.reason, l.request_id, l.created_at FROM status_log l "
      "JOIN grants g ON g.id = l.entity_id AND l.entity = 'grant' WHERE g.biz_id = $1 ORDER BY l.id");
  add("SELECT d.channel, d.amount, d.state, d.attempts, d.last_code, d.last_message, d.created_at, d.updated_at "
      "FROM delivery_bill d JOIN grants g ON g.id = d.grant_id WHERE g.biz_id = $1");
  add("SELECT e.kind, e.asset, e.amount, e.created_at FROM ledger_entry e JOIN grants g ON g.bill_no = e.bill_no "
      "WHERE g.biz_id = $1");
  add("SELECT a.asset, a.balance, a.updated_at FROM ledger_account a JOIN grants g ON g.user_id = a.user_id "
      "WHERE g.biz_id = $1");
  add("SELECT c.scope, c.period_key, c.used, c.updated_at FROM limit_counter c JOIN grants g ON g.user_id = c.user_id "
      "WHERE g.biz_id = $1 ORDER BY c.scope");
  return out;
}

// The grant as the claim answered it, without its identity.
std::string view_of(const rc::engine::GrantView& g) {
  return std::string(rc::name(g.state)) + "|" + g.activity + "|" + g.prize + "|" + g.item + "|" + g.item_kind + "|" +
         g.channel + "|" + std::to_string(g.amount) + "|" + std::to_string(g.cost_cents) + "|" +
         (g.bill_no ? "bill" : "-") + "|" + g.source.value_or("-") + "|" + std::to_string(g.pool_version.value_or(-1)) +
         "|" + std::to_string(g.bucket.value_or(-1)) + "|" + std::to_string(g.created_at) + "|" +
         std::to_string(g.updated_at) + "|" + g.degraded_from.value_or("-") + "|" + g.reason.value_or("-");
}

// A user whose preferred bucket among `buckets` is `b`, other than `not_this`.
std::string user_in_bucket(int64_t b, int64_t buckets, const std::string& not_this = "") {
  for (int i = 0; i < 1000; ++i) {
    std::string u = "u" + std::to_string(i);
    if (u != not_this && rc::engine::preferred_bucket(u, buckets) == b) return u;
  }
  FAIL("no user found for bucket " << b);
  return "";
}

}  // namespace

TEST_CASE("claim one: a claim writes the same rows and answers the same as the full flow, in one round trip") {
  TestDb db;
  db.migrate();
  Spec s;
  s.limit = 3;
  s.period = "day";
  s.budget = 1'000'000;
  s.amount = 2;
  seed(db, s);
  const bool pg = backend() == "postgres";
  rc::engine::EngineOptions full;
  full.one_statement_claims = false;
  auto f = faulty(db, 0);  // counts and logs every statement of the one-statement engine
  auto one = engine(db, kNow);
  auto ref = engine(db, kNow, full);
  // the fault store's engine runs on the system clock: its first claim only warms the rules' cache
  REQUIRE(f.box.engine->claim(request("w", "warm")).status == rc::engine::Status::granted);

  for (bool deliver : {true, false}) {
    CAPTURE(deliver);
    const std::string tag = deliver ? "d" : "n";
    auto a = one.engine->claim(request("a" + tag, "one-" + tag, deliver));
    auto b = ref.engine->claim(request("b" + tag, "ref-" + tag, deliver));
    REQUIRE(a.status == rc::engine::Status::granted);
    REQUIRE(b.status == rc::engine::Status::granted);
    CHECK(view_of(*a.grant) == view_of(*b.grant));
    CHECK(a.grant->state == (deliver ? rc::GrantState::success : rc::GrantState::init));
    // two users, each one claim: their counters, accounts and everything else must read the same
    auto ra = rows_of(db, "one-" + tag), rb = rows_of(db, "ref-" + tag);
    CHECK(ra.find(deliver ? "success|" : "init|") == 0);
    CHECK(ra == rb);
    // the answer reads back as stored
    auto reader = db.open();
    auto back = rc::engine::find_grant(reader->autocommit(), a.grant->record_code);
    REQUIRE(back);
    CHECK(view_of(*back) == view_of(*a.grant));
    CHECK(back->id == a.grant->id);
    CHECK(back->bill_no == a.grant->bill_no);

    // one round trip on PostgreSQL once the rules are cached; the full flow on SQLite
    const size_t before = f.fs->log().size();
    auto c = f.box.engine->claim(request("c" + tag, "count-" + tag, deliver));
    REQUIRE(c.status == rc::engine::Status::granted);
    std::vector<std::string> sent(f.fs->log().begin() + before, f.fs->log().end());
    if (pg) {
      REQUIRE(sent.size() == 1);
      CHECK(sent[0].find("rewardctl_claim_one") != std::string::npos);
    } else {
      CHECK(sent.size() > 4);
      for (auto& q : sent) CHECK(q.find("rewardctl_claim_one") == std::string::npos);
    }
  }
}

TEST_CASE("claim one: a refusal inside the statement leaves nothing behind and the full flow decides") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 2;
  s.buckets = 2;
  s.limit = 1;
  s.period = "day";
  s.budget = 1000;
  seed(db, s);
  auto e = engine(db, kNow);
  const std::string first = user_in_bucket(0, 2), second = user_in_bucket(0, 2, first);
  REQUIRE(e.engine->claim(request(first, "b1")).status == rc::engine::Status::granted);
  // bucket 0 is empty now: the statement takes the limit, writes the grant, credits the ledger and
  // takes the budget, then finds no unit there and undoes all of it; the full flow takes bucket 1
  auto o = e.engine->claim(request(second, "b2"));
  REQUIRE(o.status == rc::engine::Status::granted);
  CHECK(o.grant->bucket == 1);
  CHECK(db.count("SELECT used FROM limit_counter WHERE user_id = $1", {second}) == 1);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 200);
  CHECK(db.count("SELECT count(*) FROM grants") == 2);
  CHECK(db.count("SELECT count(*) FROM delivery_bill") == 2);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 2);
  CHECK(db.count("SELECT balance FROM ledger_account WHERE user_id = $1", {second}) == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant'") == 4);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 0);

  SUBCASE("limit reached: refused, nothing counted twice") {
    auto r = e.engine->claim(request(second, "b3"));
    CHECK(r.status == rc::engine::Status::rejected);
    CHECK(r.reason == "limit_reached");
    CHECK(db.count("SELECT used FROM limit_counter WHERE user_id = $1", {second}) == 1);
  }
  SUBCASE("sold out: refused with its reason, the budget and limit untouched") {
    auto r = e.engine->claim(request("z9", "b4"));
    CHECK(r.status == rc::engine::Status::rejected);
    CHECK(r.reason == "sold_out");
    CHECK(db.count("SELECT count(*) FROM limit_counter WHERE user_id = 'z9'") == 0);
    CHECK(db.count("SELECT consumed_cents FROM budget") == 200);
  }
  SUBCASE("a replay answers the grant and writes nothing") {
    auto r = e.engine->claim(request(second, "b2"));
    CHECK(r.status == rc::engine::Status::replayed);
    CHECK(r.grant->record_code == o.grant->record_code);
    CHECK(db.count("SELECT count(*) FROM grants") == 2);
  }
  SUBCASE("paused: the statement refuses, the full flow answers paused") {
    db.ok({"activity", "pause", "act", "--reason", "test"});
    auto r = e.engine->claim(request("z8", "b5"));
    CHECK(r.status == rc::engine::Status::rejected);
    CHECK(r.reason == "paused");
  }
  SUBCASE("blacklisted: the full flow answers blacklisted") {
    auto st = db.open();
    st->exec("INSERT INTO activity_user_list (activity_id, list, user_id) SELECT id, 'black', 'z7' FROM activity "
             "WHERE code = 'act'");
    auto r = e.engine->claim(request("z7", "b6"));
    CHECK(r.status == rc::engine::Status::rejected);
    CHECK(r.reason == "blacklisted");
  }
}

TEST_CASE("claim one: concurrent claims on one hot prize never oversell, and each user is limited once") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 40;
  s.limit = 1;
  s.period = "day";
  s.budget = 1'000'000;
  seed(db, s);
  constexpr int kThreads = 4, kEach = 25;
  std::atomic<int> granted{0}, sold_out{0}, limited{0}, other{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      auto e = engine(db, kNow);
      for (int i = 0; i < kEach; ++i) {
        // users overlap between threads (same user, other biz_id): the limit decides between them
        const std::string user = "u" + std::to_string(i * 2 + t % 2);
        auto o = e.engine->claim(request(user, "t" + std::to_string(t) + "-" + std::to_string(i)));
        if (o.status == rc::engine::Status::granted) ++granted;
        else if (o.reason == "sold_out") ++sold_out;
        else if (o.reason == "limit_reached") ++limited;
        else ++other;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(other == 0);
  CHECK(granted + sold_out + limited == kThreads * kEach);
  // 50 distinct users, limit 1 each, 40 units: exactly 40 granted
  CHECK(granted == 40);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 40);
  CHECK(db.count("SELECT count(DISTINCT user_id) FROM grants") == 40);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 0);
  CHECK(db.count("SELECT sum(used) FROM limit_counter") == 40);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 4000);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 40);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant'") == 80);
}

// The function takes the same claim lock as read_gate and a version switch (activity/versions.hpp):
// its key is written out in the migration, so this pins the two together.
TEST_CASE("claim one: the function takes the activity's claim lock under the key the switch takes") {
  int found = 0;
  for (const auto& m : rc::embedded::migrations()) {
    if (m.name != "0012_claim_one_statement") continue;
    ++found;
    const bool has = m.sql.find("pg_advisory_xact_lock_shared(" + rc::activity::claim_lock_args("p_code") + ")") !=
                     std::string::npos;
    CHECK(has == (m.dialect == "postgres"));
  }
  CHECK(found == 2);  // both dialects (SQLite's installs nothing)
}

// A role without EXECUTE on the function, or a database restored without it: claims still run, by
// the full flow (the function is only ever a shortcut).
TEST_CASE("claim one: a function that cannot be called leaves claims to the full flow") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  if (backend() == "postgres") db.open()->exec("DROP FUNCTION rewardctl_claim_one");
  auto e = engine(db, kNow);
  for (int i = 0; i < 2; ++i) {
    auto o = e.engine->claim(request("u" + std::to_string(i), "b" + std::to_string(i)));
    REQUIRE(o.status == rc::engine::Status::granted);
    CHECK(o.grant->state == rc::GrantState::success);
  }
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 2);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 2);
  // the CLI too (a new process, its first claim)
  auto r = db.ok({"claim", "act", "--user", "u9", "--biz-id", "b9", "-o", "json"});
  CHECK(last_json(r)["outcome"] == "granted");
}
