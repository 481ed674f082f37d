// The seeds' pre-launch checklist as concurrency tests: threads on separate connections, exact
// counts checked in the database afterwards.
#include <doctest/doctest.h>

#include <atomic>
#include <set>
#include <thread>

#include "support/seed.hpp"

using namespace rt;
using rc::engine::Status;

namespace {
template <class F>
void parallel(int n, F f) {
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back([&, i] { f(i); });
  for (auto& t : ts) t.join();
}
}  // namespace

TEST_CASE("engine: 200 claims by one user with different biz_ids and limit 1 -> exactly one grant") {
  TestDb db;
  db.migrate();
  Spec s;
  s.limit = 1;
  s.stock = 1000;
  seed(db, s);
  std::atomic<int> granted{0}, limited{0};
  parallel(8, [&](int w) {
    auto b = engine(db);
    for (int i = 0; i < 25; ++i) {
      auto o = claim(*b.engine, "act", "u1", "b" + std::to_string(w) + "_" + std::to_string(i));
      if (o.status == Status::granted) ++granted;
      else if (o.reason == rc::engine::Reason::limit_reached) ++limited;
    }
  });
  CHECK(granted == 1);
  CHECK(limited == 199);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  CHECK(db.count("SELECT used FROM limit_counter WHERE user_id = 'u1'") == 1);
  CHECK(db.count("SELECT SUM(remain) FROM stock") == 999);
}

TEST_CASE("engine: one biz_id sent 50 times concurrently -> one grant, every caller sees it") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  std::vector<std::string> seen(50);
  std::atomic<int> granted{0}, replayed{0};
  parallel(50, [&](int w) {
    auto b = engine(db);
    auto o = claim(*b.engine, "act", "u1", "same-biz");
    if (o.status == Status::granted) ++granted;
    if (o.status == Status::replayed) ++replayed;
    if (o.grant) seen[w] = o.grant->record_code;
  });
  CHECK(granted == 1);
  CHECK(replayed == 49);
  CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == 1);
  CHECK_FALSE(seen[0].empty());
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND to_state = 'init'") == 1);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 1);
  CHECK(db.count("SELECT SUM(remain) FROM stock") == 99);
}

TEST_CASE("engine: twins of one biz_id with a limit of 1 and a whitelist are replays, never rejections") {
  // On PostgreSQL the twin waits on the winner's limit-counter or qualification row; when the
  // winner commits, the twin's conditional update finds nothing: it must answer replayed.
  TestDb db;
  db.migrate();
  Spec s;
  s.limit = 1;
  s.period = "day";
  s.whitelist = true;
  seed(db, s);
  int64_t aid = db.count("SELECT id FROM activity WHERE code = 'act'");
  db.open()->exec("INSERT INTO qualification (activity_id, user_id, status, created_at, updated_at) VALUES ($1, 'u1', 'unused', 0, 0)", {aid});
  std::atomic<int> granted{0}, replayed{0}, rejected{0};
  parallel(20, [&](int) {
    auto b = engine(db);
    auto o = claim(*b.engine, "act", "u1", "twin-biz");
    if (o.status == Status::granted) ++granted;
    else if (o.status == Status::replayed) ++replayed;
    else ++rejected;
  });
  CHECK(granted == 1);
  CHECK(replayed == 19);
  CHECK(rejected == 0);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  CHECK(db.count("SELECT used FROM limit_counter") == 1);
}

TEST_CASE("engine: stock 1 and two concurrent claimers -> one grant") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 1;
  seed(db, s);
  std::atomic<int> granted{0}, sold_out{0};
  parallel(2, [&](int w) {
    auto b = engine(db);
    auto o = claim(*b.engine, "act", "user" + std::to_string(w), "biz" + std::to_string(w));
    if (o.status == Status::granted) ++granted;
    if (o.reason == rc::engine::Reason::sold_out) ++sold_out;
  });
  CHECK(granted == 1);
  CHECK(sold_out == 1);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  CHECK(db.count("SELECT remain FROM stock") == 0);
}

TEST_CASE("engine: stock 1000, 16 workers x 500 claims -> exactly 1000 grants, stock 0, never negative") {
  for (int buckets : {1, 8}) {
    CAPTURE(buckets);
    TestDb db;
    db.migrate();
    Spec s;
    s.stock = 1000;
    s.buckets = buckets;
    seed(db, s);
    std::atomic<int> granted{0}, sold_out{0}, other{0};
    parallel(16, [&](int w) {
      auto b = engine(db);
      for (int i = 0; i < 500; ++i) {
        std::string id = std::to_string(w) + "_" + std::to_string(i);
        auto o = claim(*b.engine, "act", "u" + id, "b" + id);
        if (o.status == Status::granted) ++granted;
        else if (o.reason == rc::engine::Reason::sold_out) ++sold_out;
        else ++other;
      }
    });
    CHECK(granted == 1000);
    CHECK(sold_out == 7000);
    CHECK(other == 0);
    CHECK(db.count("SELECT count(*) FROM grants") == 1000);
    CHECK(db.count("SELECT count(DISTINCT biz_id) FROM grants") == 1000);
    CHECK(db.count("SELECT SUM(remain) FROM stock") == 0);
    CHECK(db.count("SELECT count(*) FROM stock WHERE remain < 0") == 0);
    CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 1000);
    CHECK(db.count("SELECT count(*) FROM ledger_entry") == 1000);
    // Every grant's stock came out of the bucket it records.
    CHECK(db.count("SELECT count(*) FROM stock s WHERE s.total - s.remain <> (SELECT count(*) FROM grants g "
                   "WHERE g.prize_id = s.prize_id AND g.bucket = s.bucket)") == 0);
  }
}

TEST_CASE("engine: a budget of 1 cent and two concurrent claims -> one") {
  TestDb db;
  db.migrate();
  Spec s;
  s.item_kind = "cash";
  s.unit_cost = 1;
  s.amount = 1;
  s.budget = 1;
  s.stock = 10;
  seed(db, s);
  std::atomic<int> granted{0}, exhausted{0};
  parallel(2, [&](int w) {
    auto b = engine(db);
    auto o = claim(*b.engine, "act", "user" + std::to_string(w), "biz" + std::to_string(w));
    if (o.status == Status::granted) ++granted;
    if (o.reason == rc::engine::Reason::budget_exhausted) ++exhausted;
  });
  CHECK(granted == 1);
  CHECK(exhausted == 1);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 1);
  CHECK(db.count("SELECT SUM(remain) FROM stock") == 9);  // the loser's stock decrement rolled back
}

TEST_CASE("engine: concurrent deliveries of one grant credit the ledger exactly once") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  auto b = engine(db);
  rc::engine::ClaimRequest r;
  r.activity = "act";
  r.user = "u1";
  r.biz_id = "b1";
  r.deliver = false;
  auto o = b.engine->claim(r);
  REQUIRE(o.status == Status::granted);
  CHECK(o.grant->state == rc::GrantState::init);
  std::atomic<int> delivered{0};
  parallel(8, [&](int) {
    auto e = engine(db);
    if (e.engine->deliver(o.grant->id).delivered_now) ++delivered;
  });
  CHECK(delivered == 1);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 1);
  CHECK(db.count("SELECT balance FROM ledger_account WHERE user_id = 'u1'") == 1);
  CHECK(db.count("SELECT count(*) FROM delivery_bill") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND to_state = 'success'") == 1);
  // delivering a successful grant again does nothing
  CHECK_FALSE(b.engine->deliver(o.grant->id).delivered_now);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 1);
}
