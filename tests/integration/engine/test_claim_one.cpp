// The one-statement claim (core/engine/claim_one.hpp): on PostgreSQL the common claim is one call of
// rewardctl_claim_one, one round trip; it writes exactly what the full flow writes for the same
// claim; a refusal inside it leaves nothing behind and the full flow answers; under concurrency it
// never oversells. On SQLite the same cases run through the full flow, so both backends must agree.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <thread>

#include "core/activity/versions.hpp"
#include "core/embedded.hpp"
#include "core/engine/stock.hpp"
#include "support/fault_store.hpp"
#include "support/jobs.hpp"
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
         std::to_string(g.updated_at) + "|" + g.degraded_from.value_or("-") + "|" + g.reason.value_or("-") + "|" +
         std::to_string(g.draw_value.value_or(-1));
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

// Warms f's engine (its first claim reads the rules), then claims r and returns the grant: on
// PostgreSQL r must have been one call of rewardctl_claim_one, on SQLite the full flow.
rc::engine::ClaimOutcome one_round_trip(Faulty& f, const rc::engine::ClaimRequest& warm,
                                        const rc::engine::ClaimRequest& r) {
  REQUIRE(f.box.engine->claim(warm).status == rc::engine::Status::granted);
  const size_t before = f.fs->log().size();
  auto c = f.box.engine->claim(r);
  REQUIRE(c.status == rc::engine::Status::granted);
  std::vector<std::string> sent(f.fs->log().begin() + before, f.fs->log().end());
  if (is_pg()) {
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].find("rewardctl_claim_one") != std::string::npos);
  } else {
    CHECK(sent.size() > 4);
    for (auto& q : sent) CHECK(q.find("rewardctl_claim_one") == std::string::npos);
  }
  return c;
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
  const bool pg = is_pg();
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
    CHECK(r.reason == rc::engine::Reason::limit_reached);
    CHECK(db.count("SELECT used FROM limit_counter WHERE user_id = $1", {second}) == 1);
  }
  SUBCASE("sold out: refused with its reason, the budget and limit untouched") {
    auto r = e.engine->claim(request("z9", "b4"));
    CHECK(r.status == rc::engine::Status::rejected);
    CHECK(r.reason == rc::engine::Reason::sold_out);
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
    CHECK(r.reason == rc::engine::Reason::paused);
  }
  SUBCASE("blacklisted: the full flow answers blacklisted") {
    auto st = db.open();
    st->exec("INSERT INTO activity_user_list (activity_id, list, user_id) SELECT id, 'black', 'z7' FROM activity "
             "WHERE code = 'act'");
    auto r = e.engine->claim(request("z7", "b6"));
    CHECK(r.status == rc::engine::Status::rejected);
    CHECK(r.reason == rc::engine::Reason::blacklisted);
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
        else if (o.reason == rc::engine::Reason::sold_out) ++sold_out;
        else if (o.reason == rc::engine::Reason::limit_reached) ++limited;
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

namespace {

// A lottery without guaranteed draws: gold [0, 1), silver [1, 4), thanks [4, 10) - a draw's value
// names its prize. thanks is the consolation prize.
Spec lottery_spec(int64_t gold_stock, int64_t limit) {
  Spec s;
  s.kind = "lottery";
  s.custom_prizes = true;
  s.limit = limit;
  s.period = "day";
  s.budget = 1'000'000;
  s.extra = "[items.gold]\nkind = \"coupon\"\nunit_cost_cents = 500\nchannel = \"ledger\"\n"
            "[[prizes]]\ncode = \"gold\"\nitem = \"gold\"\namount = 1\nstock = " + std::to_string(gold_stock) +
            "\nweight = 1\n"
            "[[prizes]]\ncode = \"silver\"\nitem = \"thing\"\namount = 3\nstock = 1000\nweight = 3\n"
            "[[prizes]]\ncode = \"thanks\"\nitem = \"thing\"\namount = 1\nstock = 100000\nweight = 6\n"
            "[lottery]\nconsolation = \"thanks\"\n";
  return s;
}

constexpr int64_t kLotteryWeights = 10;  // the lottery's total weight

// Draws made known: each call, over `range` values (a lottery's total weight, a red packet's
// number of amounts), takes the next value of `values` (the last one repeats), counted.
struct KnownDraws {
  explicit KnownDraws(int64_t range) : range(range) {}
  int64_t range;
  std::vector<int64_t> values;
  std::atomic<int> calls{0};
  rc::engine::EngineOptions options(bool one_statement = true) {
    rc::engine::EngineOptions o;
    o.one_statement_claims = one_statement;
    o.draw_below = [this](int64_t total) {
      CHECK(total == range);
      const size_t i = size_t(calls++);
      return values.at(std::min(i, values.size() - 1));
    };
    return o;
  }
};

}  // namespace

TEST_CASE("claim one: a lottery draw writes the same rows as the full flow for the same draw, in one round trip") {
  TestDb db;
  db.migrate();
  seed(db, lottery_spec(100, 5));
  KnownDraws d1(kLotteryWeights), d2(kLotteryWeights);
  auto one = engine(db, kNow, d1.options());
  auto ref = engine(db, kNow, d2.options(false));
  const std::map<int64_t, std::string> prize_of{{0, "gold"}, {2, "silver"}, {9, "thanks"}};
  for (auto& [value, prize] : prize_of) {
    CAPTURE(value);
    d1.values = d2.values = {value};
    const std::string tag = std::to_string(value);
    auto a = one.engine->claim(request("a" + tag, "one-" + tag));
    auto b = ref.engine->claim(request("b" + tag, "ref-" + tag));
    REQUIRE(a.status == rc::engine::Status::granted);
    REQUIRE(b.status == rc::engine::Status::granted);
    CHECK(a.grant->prize == prize);
    CHECK(a.grant->draw_value == value);
    CHECK(a.grant->state == rc::GrantState::success);
    CHECK(view_of(*a.grant) == view_of(*b.grant));
    CHECK(rows_of(db, "one-" + tag) == rows_of(db, "ref-" + tag));
    CHECK(db.count("SELECT count(*) FROM status_log l JOIN grants g ON g.id = l.entity_id AND l.entity = 'grant' "
                   "WHERE g.biz_id = $1 AND l.reason = 'draw'", {"one-" + tag}) == 1);
    auto reader = db.open();
    auto back = rc::engine::find_grant(reader->autocommit(), a.grant->record_code);
    REQUIRE(back);
    CHECK(view_of(*back) == view_of(*a.grant));
  }
  CHECK(d1.calls == 3);  // one draw per claim
  CHECK(d2.calls == 3);

  // one round trip on PostgreSQL once the rules are cached; the full flow on SQLite
  KnownDraws d3(kLotteryWeights);
  d3.values = {2};
  auto f = faulty(db, 0, d3.options());
  CHECK(one_round_trip(f, request("w", "warm"), request("c", "count")).grant->prize == "silver");
}

// The statement tries only the drawn prize; when it does not grant, the full flow runs with the
// same draw. Drawing again would give a user whose prize ran out a second chance at the others.
TEST_CASE("claim one: a lottery draw the statement refuses degrades to the consolation prize, never drawn again") {
  TestDb db;
  db.migrate();
  seed(db, lottery_spec(1, 5));
  // the first draw of each claim is gold; any second draw would be silver
  KnownDraws d(kLotteryWeights);
  auto e = engine(db, kNow, d.options());
  auto claim_drawing = [&](const std::string& user, const std::string& biz) {
    d.values = {0, 1};
    d.calls = 0;
    auto o = e.engine->claim(request(user, biz));
    CHECK(d.calls == 1);
    return o;
  };
  auto first = claim_drawing("u1", "b1");
  REQUIRE(first.status == rc::engine::Status::granted);
  CHECK(first.grant->prize == "gold");
  CHECK(!first.grant->degraded_from);
  // gold is gone: the statement (PostgreSQL) finds no unit and writes nothing; the full flow keeps the
  // draw, finds gold sold out and grants the consolation prize instead
  auto second = claim_drawing("u2", "b2");
  REQUIRE(second.status == rc::engine::Status::granted);
  CHECK(second.grant->prize == "thanks");
  CHECK(second.grant->degraded_from == std::optional<std::string>("gold"));
  CHECK(second.grant->draw_value == 0);
  // gold is now known sold out in this engine: the draw is still made once, and kept
  auto third = claim_drawing("u3", "b3");
  REQUIRE(third.status == rc::engine::Status::granted);
  CHECK(third.grant->prize == "thanks");
  CHECK(third.grant->degraded_from == std::optional<std::string>("gold"));
  CHECK(third.grant->draw_value == 0);
  CHECK(db.count("SELECT count(*) FROM grants g JOIN prize p ON p.id = g.prize_id WHERE p.code = 'silver'") == 0);
  CHECK(db.count("SELECT count(*) FROM grants") == 3);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant'") == 6);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 500 + 2 * 100);
  // a limit refusal inside the statement is answered by the full flow, with one draw
  seed(db, [] {
    Spec s = lottery_spec(1, 1);
    s.code = "lim";
    return s;
  }());
  auto l = request("u1", "l1");
  l.activity = "lim";
  d.values = {4, 1};
  d.calls = 0;
  REQUIRE(e.engine->claim(l).status == rc::engine::Status::granted);
  l.biz_id = "l2";
  d.calls = 0;
  auto over = e.engine->claim(l);
  CHECK(over.status == rc::engine::Status::rejected);
  CHECK(over.reason == rc::engine::Reason::limit_reached);
  CHECK(d.calls <= 1);  // (the full flow refuses at the activity's limit before it would draw)
}

TEST_CASE("claim one: concurrent lottery draws never oversell the drawn prizes, and each user is limited once") {
  TestDb db;
  db.migrate();
  seed(db, lottery_spec(10, 1));
  constexpr int kThreads = 4, kEach = 25;
  std::atomic<int> granted{0}, limited{0}, other{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      // every thread draws gold, silver and thanks in turn (gold: 10 units for 34 draws)
      std::atomic<int> n{0};
      rc::engine::EngineOptions o;
      o.draw_below = [&n](int64_t) { return int64_t(std::array<int, 3>{0, 2, 7}[size_t(n++ % 3)]); };
      auto e = engine(db, kNow, o);
      for (int i = 0; i < kEach; ++i) {
        // users overlap between threads (same user, other biz_id): the limit decides between them
        const std::string user = "u" + std::to_string(i * 2 + t % 2);
        auto r = e.engine->claim(request(user, "t" + std::to_string(t) + "-" + std::to_string(i)));
        if (r.status == rc::engine::Status::granted) ++granted;
        else if (r.reason == rc::engine::Reason::limit_reached) ++limited;
        else ++other;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(other == 0);
  // 50 distinct users, limit 1 each: exactly 50 granted, the rest limited
  CHECK(granted == 50);
  CHECK(limited == kThreads * kEach - 50);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 50);
  CHECK(db.count("SELECT count(DISTINCT user_id) FROM grants") == 50);
  CHECK(db.count("SELECT count(*) FROM grants g JOIN prize p ON p.id = g.prize_id WHERE p.code = 'gold'") <= 10);
  // every unit is a grant or still in stock, per prize
  CHECK(db.count("SELECT count(*) FROM prize p WHERE p.stock_total <> (SELECT sum(remain) FROM stock s WHERE "
                 "s.prize_id = p.id) + (SELECT count(*) FROM grants g WHERE g.prize_id = p.id)") == 0);
  CHECK(db.count("SELECT consumed_cents FROM budget") ==
        db.count("SELECT sum(cost_cents) FROM grants WHERE state = 'success'"));
  CHECK(db.count("SELECT sum(used) FROM limit_counter") == 50);
  CHECK(db.count("SELECT count(*) FROM grants WHERE draw_value IS NULL") == 0);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant'") == 100);
}

namespace {

// A red packet of 100..300 cents of cash (unit cost 1 cent) from a budget of `budget` cents.
Spec redpack_spec(int64_t budget) {
  Spec s = redpack(budget);
  s.limit = 5;
  s.period = "day";
  return s;
}

constexpr int64_t kPacketAmounts = 201;  // the red packet's amounts, 100..300

}  // namespace

TEST_CASE("claim one: a red packet writes the same rows as the full flow for the same amount, in one round trip") {
  TestDb db;
  db.migrate();
  seed(db, redpack_spec(100'000));
  KnownDraws k1(kPacketAmounts), k2(kPacketAmounts);
  auto one = engine(db, kNow, k1.options());
  auto ref = engine(db, kNow, k2.options(false));
  for (int64_t offset : {0, 57, 200}) {
    CAPTURE(offset);
    k1.values = k2.values = {offset};
    const std::string tag = std::to_string(offset);
    auto a = one.engine->claim(request("a" + tag, "one-" + tag));
    auto b = ref.engine->claim(request("b" + tag, "ref-" + tag));
    REQUIRE(a.status == rc::engine::Status::granted);
    REQUIRE(b.status == rc::engine::Status::granted);
    CHECK(a.grant->amount == 100 + offset);
    CHECK(a.grant->cost_cents == 100 + offset);
    CHECK(view_of(*a.grant) == view_of(*b.grant));
    CHECK(rows_of(db, "one-" + tag) == rows_of(db, "ref-" + tag));
  }
  CHECK(k1.calls == 3);
  CHECK(k2.calls == 3);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 2 * (100 + 157 + 300));

  KnownDraws k3(kPacketAmounts);
  k3.values = {1};
  auto f = faulty(db, 0, k3.options());
  CHECK(one_round_trip(f, request("w", "warm"), request("c", "count")).grant->amount == 101);
}

// The statement grants a red packet only when the budget covers the drawn amount whole; near the
// end the full flow caps the SAME amount by the budget left, as it would have had it drawn it.
TEST_CASE("claim one: a red packet the budget no longer covers is capped by the full flow, never drawn again") {
  TestDb db;
  db.migrate();
  seed(db, redpack_spec(550));
  KnownDraws k(kPacketAmounts);
  auto e = engine(db, kNow, k.options());
  auto claim_drawing = [&](const std::string& user, const std::string& biz, std::vector<int64_t> offsets) {
    k.values = std::move(offsets);
    k.calls = 0;
    auto o = e.engine->claim(request(user, biz));
    CHECK(k.calls == 1);
    return o;
  };
  // 300 of 550: covered whole
  auto first = claim_drawing("u1", "b1", {200, 0});
  REQUIRE(first.status == rc::engine::Status::granted);
  CHECK(first.grant->amount == 300);
  // 280 drawn, 250 left: the statement refuses, the full flow grants the drawn amount capped at 250
  // (a second draw would have given 100)
  auto second = claim_drawing("u2", "b2", {180, 0});
  REQUIRE(second.status == rc::engine::Status::granted);
  CHECK(second.grant->amount == 250);
  CHECK(second.grant->cost_cents == 250);
  // nothing left below the minimum: budget_exhausted, answered by the full flow
  auto third = claim_drawing("u3", "b3", {0, 0});
  CHECK(third.status == rc::engine::Status::rejected);
  CHECK(third.reason == rc::engine::Reason::budget_exhausted);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 550);
  CHECK(db.count("SELECT sum(amount) FROM grants") == 550);
  CHECK(db.count("SELECT sum(amount) FROM ledger_entry") == 550);
  CHECK(db.count("SELECT count(*) FROM grants") == 2);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant'") == 4);
}

TEST_CASE("claim one: concurrent red packets never spend past the budget") {
  TestDb db;
  db.migrate();
  seed(db, redpack_spec(15'000));  // (100 packets in stock, about 75 fit)
  constexpr int kThreads = 4, kEach = 30;
  std::atomic<int> granted{0}, exhausted{0}, other{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      auto e = engine(db, kNow);  // (the secure-seeded generator: amounts are random)
      for (int i = 0; i < kEach; ++i) {
        auto r = e.engine->claim(request("t" + std::to_string(t) + "u" + std::to_string(i),
                                         "t" + std::to_string(t) + "-" + std::to_string(i)));
        if (r.status == rc::engine::Status::granted) ++granted;
        else if (r.reason == rc::engine::Reason::budget_exhausted) ++exhausted;
        else ++other;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(other == 0);
  CHECK(granted + exhausted == kThreads * kEach);
  // 120 packets of 100 to 300 cents cannot fit 15,000 cents: the budget runs out, exactly
  CHECK(exhausted > 0);
  CHECK(db.count("SELECT consumed_cents FROM budget") == db.count("SELECT sum(cost_cents) FROM grants"));
  CHECK(db.count("SELECT consumed_cents FROM budget") <= 15'000);
  // spent down: a refusal means less than one packet's cost (at most 300) was left at that moment,
  // and the budget left only falls after it (a claim that lost a race to the budget row is refused
  // although a smaller amount would still have fit: the full flow's rule, on both paths)
  CHECK(db.count("SELECT consumed_cents FROM budget") > 15'000 - 300);
  CHECK(db.count("SELECT count(*) FROM grants WHERE amount < 100 OR amount > 300") == 0);
  CHECK(db.count("SELECT sum(amount) FROM ledger_entry") == db.count("SELECT sum(amount) FROM grants"));
  CHECK(db.count("SELECT count(*) FROM grants") == granted);
}

// A database restored without the function (where claims ran the full flow) still migrates to v14,
// and gets the function back.
TEST_CASE("claim one: migration 0014 runs where the function is missing, and claims use it afterwards") {
  TestDb db;
  db.migrate();
  const bool pg = is_pg();
  if (pg) {
    auto st = db.open();
    st->exec("DROP FUNCTION rewardctl_claim_one");
    st->exec("DELETE FROM schema_migrations WHERE version = 14");
  }
  db.ok({"db", "migrate"});
  if (pg)
    CHECK(db.count("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE "
                   "n.nspname = current_schema() AND p.proname = 'rewardctl_claim_one' AND p.pronargs = 27") == 1);
  seed(db, lottery_spec(5, 5));
  KnownDraws d(kLotteryWeights);
  d.values = {0};
  auto f = faulty(db, 0, d.options());
  auto c = one_round_trip(f, request("w", "warm"), request("c", "count"));
  CHECK(c.grant->prize == "gold");
  CHECK(c.grant->draw_value == 0);
}

// The function takes the same claim lock as read_gate and a version switch (activity/versions.hpp):
// its key is written out in the migration, so this pins the two together.
TEST_CASE("claim one: the functions take the activity's claim lock under the key the switch takes") {
  int found = 0;
  for (const auto& m : rc::embedded::migrations()) {
    if (m.name != "0012_claim_one_statement" && m.name != "0013_claim_chunk" && m.name != "0014_claim_one_draw")
      continue;
    ++found;
    const bool has = m.sql.find("pg_advisory_xact_lock_shared(" + rc::activity::claim_lock_args("p_code") + ")") !=
                     std::string::npos;
    CHECK(has == (m.dialect == "postgres"));
  }
  CHECK(found == 6);  // both functions (the first made twice), both dialects (SQLite's install nothing)
}

// A role without EXECUTE on the function, or a database restored without it: claims still run, by
// the full flow (the function is only ever a shortcut).
TEST_CASE("claim one: a function that cannot be called leaves claims to the full flow") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  if (is_pg()) db.open()->exec("DROP FUNCTION rewardctl_claim_one");
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

// Only "cannot be called" falls back: any other failure of the call (here the function raising an
// internal error, as a bug of ours would) is the claim's error, exit 70, and not a silent switch to
// the full flow with a warning about privileges.
TEST_CASE("claim one: a call that fails for another reason is an error, not a fallback") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  if (is_pg()) {
    auto st = db.open();
    auto f = st->query("SELECT pg_get_function_arguments(p.oid), pg_get_function_result(p.oid) FROM pg_proc p JOIN "
                       "pg_namespace n ON n.oid = p.pronamespace WHERE p.proname = 'rewardctl_claim_one' AND "
                       "n.nspname = current_schema()");
    REQUIRE(f.size() == 1);
    st->autocommit().exec_script("CREATE OR REPLACE FUNCTION rewardctl_claim_one(" + f[0].str(0) + ") RETURNS " + f[0].str(1) +
                    " LANGUAGE plpgsql AS $body$ BEGIN RAISE EXCEPTION 'simulated fault' USING ERRCODE = 'XX000'; "
                    "END $body$");
    auto r = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1"}, 70);
    CHECK(r.err.find("simulated fault") != std::string::npos);
    CHECK(r.err.find("EXECUTE") == std::string::npos);
    CHECK(db.count("SELECT count(*) FROM grants") == 0);
  } else {
    db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1"});  // SQLite has no function to call
    CHECK(db.count("SELECT count(*) FROM grants") == 1);
  }
}

// An overload someone added makes the call ambiguous (42725): that too is "cannot be called", and the
// claims go on by the full flow rather than all failing.
TEST_CASE("claim one: an ambiguous overload of the function leaves claims to the full flow") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  if (is_pg()) {
    auto st = db.open();
    auto f = st->query("SELECT pg_get_function_arguments(p.oid), pg_get_function_result(p.oid) FROM pg_proc p JOIN "
                       "pg_namespace n ON n.oid = p.pronamespace WHERE p.proname = 'rewardctl_claim_one' AND "
                       "n.nspname = current_schema()");
    REQUIRE(f.size() == 1);
    std::string args = f[0].str(0);
    const std::string last = "p_draw bigint DEFAULT NULL::bigint";
    REQUIRE(args.find(last) != std::string::npos);
    args.replace(args.find(last), last.size(), "p_draw integer DEFAULT NULL");
    st->autocommit().exec_script("CREATE FUNCTION rewardctl_claim_one(" + args + ") RETURNS " + f[0].str(1) +
                                 " LANGUAGE sql AS 'SELECT CAST(NULL AS BIGINT)'");
  }
  auto r = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1", "-o", "json"});
  CHECK(last_json(r)["outcome"] == "granted");
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 1);
  if (is_pg()) CHECK(r.err.find("cannot be called") != std::string::npos);
}

// ---- a chunk in one statement (rewardctl_claim_chunk, list-issue's chunks) ----

namespace {

// Requests for users prefix0..prefix(n-1), under biz ids "<biz>:<user>", for claim_many.
std::vector<rc::engine::ClaimRequest> chunk_requests(const std::string& prefix, int n, const std::string& biz = "c") {
  std::vector<rc::engine::ClaimRequest> rs;
  for (int i = 0; i < n; ++i) rs.push_back(request(prefix + std::to_string(i), biz + ":" + prefix + std::to_string(i)));
  return rs;
}

std::vector<rc::engine::ClaimOutcome> run_chunk(EngineBox& b, const std::vector<rc::engine::ClaimRequest>& rs) {
  std::vector<rc::engine::ClaimOutcome> outs;
  b.store->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) { outs = b.engine->claim_many(tx, rs); });
  return outs;
}

size_t naming(const std::vector<std::string>& log, size_t from, const std::string& what) {
  size_t n = 0;
  for (size_t i = from; i < log.size(); ++i) n += log[i].find(what) != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("claim chunk: a chunk writes the same rows and answers the same as the full flow, in one statement") {
  // the same chunk (same users, same biz ids, same clock) in two databases: one statement, and the
  // full flow request by request
  TestDb one_db, ref_db;
  Spec s;
  s.limit = 3;
  s.period = "day";
  s.budget = 1'000'000;
  s.amount = 2;
  s.buckets = 4;
  s.extra = "[[prizes]]\ncode = \"p2\"\nitem = \"thing\"\namount = 5\nstock = 50\nvalidity_days = 7\n"
            "[prizes.limit]\ncount = 2\nperiod = \"week\"\n";
  for (const TestDb* db : {&one_db, &ref_db}) {
    db->migrate();
    seed(*db, s);
  }
  rc::engine::EngineOptions full;
  full.one_statement_claims = false;
  auto one = engine(one_db, kNow);
  auto ref = engine(ref_db, kNow, full);
  for (bool deliver : {true, false})
    for (std::string prize : {"", "p1", "p2"}) {
      CAPTURE(deliver);
      CAPTURE(prize);
      auto rs = chunk_requests(deliver ? "d" : "n", 12, "c" + prize);
      for (auto& r : rs) {
        r.deliver = deliver;
        if (!prize.empty()) r.prize = prize;
      }
      auto a = run_chunk(one, rs), b = run_chunk(ref, rs);
      REQUIRE(a.size() == rs.size());
      REQUIRE(b.size() == rs.size());
      for (size_t i = 0; i < rs.size(); ++i) {
        CAPTURE(i);
        REQUIRE(a[i].status == rc::engine::Status::granted);
        REQUIRE(b[i].status == rc::engine::Status::granted);
        // in request order (the chunk runs in user order: d0, d1, d10, d11, d2, ...)
        CHECK(a[i].grant->user == rs[i].user);
        CHECK(a[i].grant->biz_id == rs[i].biz_id);
        CHECK(b[i].grant->user == rs[i].user);
        CHECK(view_of(*a[i].grant) == view_of(*b[i].grant));
        CHECK(a[i].grant->state == (deliver ? rc::GrantState::success : rc::GrantState::init));
        CHECK(rows_of(one_db, rs[i].biz_id) == rows_of(ref_db, rs[i].biz_id));
        // the answer reads back as stored
        auto reader = one_db.open();
        auto back = rc::engine::find_grant(reader->autocommit(), a[i].grant->record_code);
        REQUIRE(back);
        CHECK(view_of(*back) == view_of(*a[i].grant));
        CHECK(back->id == a[i].grant->id);
        CHECK(back->bill_no == a[i].grant->bill_no);
      }
    }
  for (auto sql : {"SELECT sum(remain) FROM stock", "SELECT consumed_cents FROM budget",
                   "SELECT count(*) FROM status_log", "SELECT sum(balance) FROM ledger_account",
                   "SELECT sum(used) FROM limit_counter"}) {
    CAPTURE(sql);
    CHECK(one_db.count(sql) == ref_db.count(sql));
  }
  // buckets: each gave exactly the grants recorded on it
  CHECK(one_db.count("SELECT count(*) FROM stock s WHERE s.total - s.remain <> (SELECT count(*) FROM grants g WHERE "
                     "g.prize_id = s.prize_id AND g.bucket = s.bucket)") == 0);
  // which path wrote them: the statement writes a chunk's init rows, then its success rows; the
  // full flow writes each grant's two rows one after the other
  const std::string adjacent =
      "SELECT count(*) FROM status_log a JOIN status_log b ON b.entity = 'grant' AND b.entity_id = a.entity_id AND "
      "b.to_state = 'success' WHERE a.entity = 'grant' AND a.to_state = 'init' AND b.id = a.id + 1";
  CHECK(ref_db.count(adjacent) == 36);
  CHECK(one_db.count(adjacent) == (is_pg() ? 0 : 36));
}

TEST_CASE("claim chunk: a covered chunk is one call of the function on PostgreSQL, the full flow on SQLite") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 1000;
  s.buckets = 4;
  s.budget = 1'000'000;
  s.limit = 1;
  seed(db, s);
  auto f = faulty(db, 0);
  run_chunk(f.box, chunk_requests("w", 5));  // warms the rules' cache
  const auto& log = f.fs->log();
  const size_t before = log.size();
  auto outs = run_chunk(f.box, chunk_requests("u", 50));
  for (auto& o : outs) CHECK(o.status == rc::engine::Status::granted);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 55);
  if (is_pg()) {
    // BEGIN, SAVEPOINT, the call, RELEASE, COMMIT: no statement per request
    CHECK(naming(log, before, "rewardctl_claim_chunk") == 1);
    CHECK(naming(log, before, "INSERT INTO grants") == 0);
    CHECK(log.size() - before <= 5);
  } else {
    CHECK(naming(log, before, "rewardctl_claim_chunk") == 0);
    CHECK(naming(log, before, "INSERT INTO grants") == 50);
  }
}

TEST_CASE("claim chunk: one request the chunk cannot grant leaves nothing of the statement, and each gets claim()'s answer") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 100;
  s.buckets = 2;
  s.budget = 1'000'000;
  s.limit = 1;
  s.black = "\"u5\"";
  seed(db, s);
  rc::engine::EngineOptions o;
  o.sold_out_memory_ms = -1;  // every chunk tries the statement (no memory of the refused one)
  auto e = engine(db, kNow, o);
  // a2 has had its one grant: the statement's limit update refuses after the counters of a0 and a1
  REQUIRE(e.engine->claim(request("a2", "earlier:a2")).status == rc::engine::Status::granted);
  auto outs = run_chunk(e, chunk_requests("a", 5));
  REQUIRE(outs.size() == 5);
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(outs[size_t(i)].status == (i == 2 ? rc::engine::Status::rejected : rc::engine::Status::granted));
  }
  CHECK(outs[2].reason == rc::engine::Reason::limit_reached);
  // u5 is blacklisted and u7's biz id is taken (by u7: a replay): the gate refuses
  REQUIRE(e.engine->claim(request("u7", "c:u7")).status == rc::engine::Status::granted);
  outs = run_chunk(e, chunk_requests("u", 10));
  REQUIRE(outs.size() == 10);
  for (int i = 0; i < 10; ++i) {
    CAPTURE(i);
    const auto& o = outs[size_t(i)];
    if (i == 5) {
      CHECK(o.status == rc::engine::Status::rejected);
      CHECK(o.reason == rc::engine::Reason::blacklisted);
    } else if (i == 7) {
      CHECK(o.status == rc::engine::Status::replayed);
    } else {
      CHECK(o.status == rc::engine::Status::granted);
    }
  }
  // exactly 2 + 4 + 8 grants, each once, with everything that goes with them
  CHECK(db.count("SELECT count(*) FROM grants") == 14);
  CHECK(db.count("SELECT sum(used) FROM limit_counter") == 14);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 1400);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 86);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 14);
  CHECK(db.count("SELECT count(*) FROM delivery_bill") == 14);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant'") == 28);
  CHECK(db.count("SELECT sum(balance) FROM ledger_account") == 14);
}

TEST_CASE("claim chunk: after a chunk the statement refused, the activity's next chunks skip it for a while") {
  TestDb db;
  db.migrate();
  Spec s;
  s.limit = 1;
  seed(db, s);
  rc::engine::EngineOptions o;
  o.sold_out_memory_ms = 600'000;  // the memory outlasts the test however slow the machine
  auto f = faulty(db, 0, o);
  REQUIRE(f.box.engine->claim(request("a1", "earlier:a1")).status == rc::engine::Status::granted);
  const auto& log = f.fs->log();
  auto outs = run_chunk(f.box, chunk_requests("a", 3));  // a1 is at its limit: refused, then the full flow
  CHECK(outs[1].reason == rc::engine::Reason::limit_reached);
  const size_t mark = log.size();
  outs = run_chunk(f.box, chunk_requests("b", 3));
  for (auto& x : outs) CHECK(x.status == rc::engine::Status::granted);
  CHECK(naming(log, 0, "rewardctl_claim_chunk") == (is_pg() ? 1 : 0));
  CHECK(naming(log, mark, "rewardctl_claim_chunk") == 0);
  CHECK(naming(log, mark, "INSERT INTO grants") == 3);
  CHECK(db.count("SELECT count(*) FROM grants") == 6);
}

TEST_CASE("claim chunk: a bucket short of its users' units refuses the chunk, and the full flow moves on to the next") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 4;
  s.buckets = 2;  // 2 units each
  s.budget = 1'000'000;
  seed(db, s);
  auto e = engine(db, kNow);
  // three users who prefer bucket 0: its 2 units are short of 3 after the grants, ledger and budget
  std::vector<rc::engine::ClaimRequest> rs;
  for (int i = 0; rs.size() < 3 && i < 1000; ++i) {
    std::string u = "z" + std::to_string(i);
    if (rc::engine::preferred_bucket(u, 2) == 0) rs.push_back(request(u, "z:" + u));
  }
  REQUIRE(rs.size() == 3);
  auto outs = run_chunk(e, rs);
  for (auto& o : outs) CHECK(o.status == rc::engine::Status::granted);
  CHECK(db.count("SELECT remain FROM stock WHERE bucket = 0") == 0);
  CHECK(db.count("SELECT remain FROM stock WHERE bucket = 1") == 1);
  CHECK(db.count("SELECT count(*) FROM grants WHERE bucket = 1") == 1);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 300);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 3);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant'") == 6);
}

TEST_CASE("claim chunk: concurrent chunks sharing users never oversell, and each user is limited once") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 100;
  s.buckets = 4;
  s.budget = 1'000'000;
  s.limit = 1;
  seed(db, s);
  // 4 workers x 4 chunks of 10: 80 users, each in two workers' chunks (in a different order), 100 units
  std::atomic<int> granted{0}, limited{0}, other{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < 4; ++w)
    ts.emplace_back([&, w] {
      auto b = engine(db);
      for (int c = 0; c < 4; ++c) {
        std::vector<rc::engine::ClaimRequest> rs;
        for (int i = 0; i < 10; ++i) {
          const int u = (w % 2) * 40 + c * 10 + (w < 2 ? i : 9 - i);
          rs.push_back(request("u" + std::to_string(u), "w" + std::to_string(w) + ":" + std::to_string(u)));
        }
        for (auto& o : run_chunk(b, rs)) {
          if (o.status == rc::engine::Status::granted) ++granted;
          else if (o.reason == rc::engine::Reason::limit_reached) ++limited;
          else ++other;
        }
      }
    });
  for (auto& t : ts) t.join();
  CHECK(granted == 80);
  CHECK(limited == 80);
  CHECK(other == 0);
  CHECK(db.count("SELECT count(*) FROM grants") == 80);
  CHECK(db.count("SELECT count(DISTINCT user_id) FROM grants") == 80);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 20);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 8000);
  CHECK(db.count("SELECT sum(used) FROM limit_counter") == 80);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 80);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant'") == 160);
  CHECK(db.count("SELECT count(*) FROM stock s WHERE s.total - s.remain <> (SELECT count(*) FROM grants g WHERE "
                 "g.prize_id = s.prize_id AND g.bucket = s.bucket)") == 0);
}

TEST_CASE("claim chunk: a chunk function that cannot be called leaves chunks to the full flow") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  if (is_pg()) db.open()->exec("DROP FUNCTION rewardctl_claim_chunk");
  auto e = engine(db, kNow);
  for (int c = 0; c < 2; ++c) {
    auto outs = run_chunk(e, chunk_requests("u" + std::to_string(c) + "_", 5));
    for (auto& o : outs) {
      REQUIRE(o.status == rc::engine::Status::granted);
      CHECK(o.grant->state == rc::GrantState::success);
    }
  }
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 10);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 10);
}

// A user id that is not valid UTF-8 has no JSON form: the statement is never sent (a replacement
// character would have granted to another id); the full flow answers as it always did.
TEST_CASE("claim chunk: a user id that is not UTF-8 never reaches the statement") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  auto e = engine(db, kNow);
  auto rs = chunk_requests("u", 3);
  rs[1].user = "bad\xff";
  rs[1].biz_id = "c:bad\xff";
  bool threw = false;
  try {
    run_chunk(e, rs);
  } catch (const rc::Error&) {
    threw = true;  // PostgreSQL's UTF8 database refuses the bytes
  }
  if (is_pg()) {
    CHECK(threw);
    CHECK(db.count("SELECT count(*) FROM grants") == 0);
  } else {
    CHECK_FALSE(threw);
    CHECK(db.count("SELECT count(*) FROM grants WHERE user_id LIKE 'bad%' AND length(CAST(user_id AS BLOB)) = 4") == 1);
    // the library stored what the edges would have refused: reconcile names the row, never rewrites it
    db.expect_damage();
    auto r = db.ok({"reconcile", "--checks", "identifiers", "-o", "json"}, 1);
    CHECK(r.out.find("\"check\":\"identifiers\"") != std::string::npos);
    CHECK(r.out.find("626164FF") != std::string::npos);  // the user id's bytes, in hex
  }
}

TEST_CASE("claim one: a user at the limit is refused limit_reached without waiting for the counter row's lock") {
  TestDb db;
  db.migrate();
  Spec s;
  s.limit = 1;
  s.period = "day";
  seed(db, s);
  rc::engine::EngineOptions full;
  full.one_statement_claims = false;
  auto one = engine(db, kNow);
  auto ref = engine(db, kNow, full);
  REQUIRE(one.engine->claim(request("u1", "first")).status == rc::engine::Status::granted);
  const std::string key = "SELECT used FROM limit_counter WHERE user_id = 'u1'";
  const int64_t updated = db.count("SELECT updated_at FROM limit_counter WHERE user_id = 'u1'");
  // Both paths, each under the same condition: on PostgreSQL another session holds the counter
  // row's lock until the claim has answered (it would wait forever for a refusal that queued on
  // the row); on SQLite the database is the lock, so the claim runs alone.
  int n = 0;
  for (auto* box : {&one, &ref}) {
    CAPTURE(n);
    const std::string biz = "again-" + std::to_string(++n);
    rc::engine::ClaimOutcome o;
    if (is_pg()) {
      auto holder = db.open();
      std::atomic<bool> locked{false}, answered{false}, gave_up{false};
      std::thread t([&] {
        holder->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
          tx.query(key + " FOR UPDATE");
          locked = true;
          // released when the claim has answered, or after 20 s (then the claim waited on the row)
          if (!eventually([&] { return answered.load(); }, 20)) gave_up = true;
        });
      });
      REQUIRE(eventually([&] { return locked.load(); }, 20));
      o = box->engine->claim(request("u1", biz));
      answered = true;
      t.join();
      CHECK_FALSE(gave_up.load());
    } else {
      o = box->engine->claim(request("u1", biz));
    }
    CHECK(o.status == rc::engine::Status::rejected);
    CHECK(o.reason == rc::engine::Reason::limit_reached);
  }
  // nothing counted, nothing touched
  CHECK(db.count(key) == 1);
  CHECK(db.count("SELECT updated_at FROM limit_counter WHERE user_id = 'u1'") == updated);
  CHECK(db.count("SELECT count(*) FROM grants WHERE user_id = 'u1'") == 1);
}
