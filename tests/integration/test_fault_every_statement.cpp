// The fault seam (support/fault_store.hpp): claim, delivery and reversal stopped at every statement
// in turn, as when the connection drops or the process is killed there, then run again without
// faults. After each stop the books are whole - stock plus holding grants conserved, the budget and
// the limit counters equal to the grants, one credit per delivered grant and balances equal to the
// entries, every grant's last status-log row naming its state - and the harness's reconcile oracle
// checks everything else at the end. A claim delivered through the ledger is one commit: stopped
// anywhere, it is delivered or it never happened, never a grant left in init.
#include <doctest/doctest.h>

#include "core/engine/reversal.hpp"
#include "support/fault_store.hpp"
#include "support/seed.hpp"

using namespace rt;

namespace {

constexpr int64_t kStock = 100;
const char* const kHolding = "('init', 'issuing', 'success', 'delayed_resend', 'awaiting_external')";

void check_books_whole(const TestDb& db) {
  const int64_t holding = db.count(std::string("SELECT count(*) FROM grants WHERE state IN ") + kHolding);
  CHECK(db.count("SELECT sum(remain) FROM stock") + holding == kStock);
  CHECK(db.count("SELECT consumed_cents FROM budget") ==
        db.count(std::string("SELECT coalesce(sum(cost_cents), 0) FROM grants WHERE state IN ") + kHolding));
  CHECK(db.count("SELECT coalesce(sum(used), 0) FROM limit_counter") == holding);
  CHECK(db.count("SELECT count(*) FROM ledger_entry WHERE kind = 'credit'") ==
        db.count("SELECT count(*) FROM grants WHERE state IN ('success', 'reversed')"));
  CHECK(db.count("SELECT count(*) FROM ledger_entry WHERE kind = 'reverse'") ==
        db.count("SELECT count(*) FROM grants WHERE state = 'reversed'"));
  CHECK(db.count("SELECT count(*) FROM delivery_bill") == db.count("SELECT count(*) FROM grants WHERE bill_no IS NOT NULL"));
  CHECK(db.count("SELECT coalesce(sum(balance), 0) FROM ledger_account") ==
        db.count("SELECT coalesce(sum(amount), 0) FROM ledger_entry"));
  CHECK(db.count("SELECT count(*) FROM grants g WHERE g.state <> (SELECT l.to_state FROM status_log l WHERE l.entity = "
                 "'grant' AND l.entity_id = g.id ORDER BY l.id DESC LIMIT 1)") == 0);
}

void seed_books(const TestDb& db) {
  Spec s;
  s.stock = kStock;
  s.limit = 1;
  s.period = "day";
  s.budget = 1'000'000;
  seed(db, s);
}

// An engine whose store dies at statement n.
struct Faulty {
  FaultStore* fs;
  EngineBox box;
};
Faulty faulty(const TestDb& db, int64_t n) {
  EngineBox b;
  auto fs = std::make_unique<FaultStore>(db.open(), n);
  FaultStore* raw = fs.get();
  b.store = std::move(fs);
  b.clock = std::make_unique<rc::SystemClock>();
  rc::engine::EngineOptions o;
  o.actor = "test";
  b.engine = std::make_unique<rc::engine::Engine>(*b.store, *b.clock, o);
  return {raw, std::move(b)};
}

rc::engine::ClaimRequest request(const std::string& user, const std::string& biz, bool deliver) {
  rc::engine::ClaimRequest r;
  r.activity = "act";
  r.user = user;
  r.biz_id = biz;
  r.deliver = deliver;
  return r;
}

}  // namespace

TEST_CASE("faults: a ledger claim stopped at any statement is delivered in full or never happened") {
  TestDb db;
  db.migrate();
  seed_books(db);
  int64_t n = 1;
  for (;; ++n) {
    REQUIRE(n < 100);
    CAPTURE(n);
    const std::string user = "u" + std::to_string(n), biz = "b" + std::to_string(n);
    auto f = faulty(db, n);
    try {
      f.box.engine->claim(request(user, biz, true));
    } catch (const rc::Error&) {
      CHECK(f.fs->fired());
    }
    // one commit: the grant is there and delivered, or not there at all
    CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = $1 AND state <> 'success'", {biz}) == 0);
    check_books_whole(db);
    if (!f.fs->fired()) break;  // the claim ran every statement it has
    // the caller's retry with the same biz_id: one grant, delivered
    auto b = engine(db);
    auto o = b.engine->claim(request(user, biz, true));
    REQUIRE(o.grant);
    CHECK(o.grant->state == "success");
    CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = $1", {biz}) == 1);
    check_books_whole(db);
  }
  // a delivered claim is several statements, and the loop stopped at every one of them
  CHECK(n > 4);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == n);
}

TEST_CASE("faults: delivery of a committed grant stopped at any statement leaves it in init or delivered") {
  TestDb db;
  db.migrate();
  seed_books(db);
  auto b = engine(db);
  int64_t n = 1;
  for (;; ++n) {
    REQUIRE(n < 100);
    CAPTURE(n);
    const std::string biz = "b" + std::to_string(n);
    auto o = b.engine->claim(request("u" + std::to_string(n), biz, false));
    REQUIRE(o.grant);
    REQUIRE(o.grant->state == "init");
    auto f = faulty(db, n);
    try {
      f.box.engine->deliver(o.grant->id);
    } catch (const rc::Error&) {
      CHECK(f.fs->fired());
    }
    CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = $1 AND state NOT IN ('init', 'success')", {biz}) == 0);
    check_books_whole(db);
    if (!f.fs->fired()) break;
    CHECK(b.engine->deliver(o.grant->id).state == "success");
    check_books_whole(db);
  }
  CHECK(n > 4);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == n);
}

TEST_CASE("faults: a reversal stopped at any statement gives everything back or nothing") {
  TestDb db;
  db.migrate();
  seed_books(db);
  auto b = engine(db);
  int64_t n = 1;
  for (;; ++n) {
    REQUIRE(n < 100);
    CAPTURE(n);
    auto o = b.engine->claim(request("u" + std::to_string(n), "b" + std::to_string(n), true));
    REQUIRE(o.grant);
    REQUIRE(o.grant->state == "success");
    const std::string code = o.grant->record_code;
    const std::string req = "refund-" + std::to_string(n);
    auto f = faulty(db, n);
    try {
      rc::engine::reverse(*f.box.store, code, "refund", req, "test", rc::SystemClock().now_ms());
    } catch (const rc::Error&) {
      CHECK(f.fs->fired());
    }
    CHECK(db.count("SELECT count(*) FROM grants WHERE record_code = $1 AND state NOT IN ('success', 'reversed')",
                   {code}) == 0);
    check_books_whole(db);
    if (!f.fs->fired()) break;
    auto r = rc::engine::reverse(*b.store, code, "refund", req, "test", rc::SystemClock().now_ms());
    CHECK(r.state == "reversed");
    check_books_whole(db);
  }
  CHECK(n > 4);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'reversed'") == n);
}
