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

rc::engine::ClaimRequest request(const std::string& user, const std::string& biz, bool deliver) {
  rc::engine::ClaimRequest r;
  r.activity = "act";
  r.user = user;
  r.biz_id = biz;
  r.deliver = deliver;
  return r;
}

// Stops `attempt` at statement n = 1, 2, ... of a store that dies there, until it runs to its end.
// After each stop: `check` (the books as the stop left them), then `retry` on a healthy store and
// `check` again. `prepare(n)` makes the n-th round's input. Returns the number of rounds.
template <class Prepare, class Attempt, class Check, class Retry>
int64_t stop_at_every_statement(const TestDb& db, Prepare prepare, Attempt attempt, Check check, Retry retry) {
  for (int64_t n = 1;; ++n) {
    REQUIRE(n < 100);
    CAPTURE(n);
    auto input = prepare(n);
    auto f = faulty(db, n);
    try {
      attempt(f, input);
    } catch (const rc::Error&) {
      CHECK(f.fs->fired());
    }
    check(input);
    check_books_whole(db);
    if (!f.fs->fired()) return n;  // it ran every statement it has
    retry(input);
    check_books_whole(db);
  }
}

}  // namespace

TEST_CASE("faults: a ledger claim stopped at any statement is delivered in full or never happened") {
  TestDb db;
  db.migrate();
  seed_books(db);
  auto b = engine(db);
  auto biz = [](int64_t n) { return "b" + std::to_string(n); };
  const int64_t n = stop_at_every_statement(
      db, [](int64_t n) { return n; },
      [&](Faulty& f, int64_t n) { f.box.engine->claim(request("u" + std::to_string(n), biz(n), true)); },
      // one commit: the grant is there and delivered, or not there at all
      [&](int64_t n) {
        CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = $1 AND state <> 'success'", {biz(n)}) == 0);
      },
      // the caller's retry with the same biz_id: one grant, delivered
      [&](int64_t n) {
        auto o = b.engine->claim(request("u" + std::to_string(n), biz(n), true));
        REQUIRE(o.grant);
        CHECK(o.grant->state == rc::GrantState::success);
        CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = $1", {biz(n)}) == 1);
      });
  // a delivered claim is several statements, and the loop stopped at every one of them
  CHECK(n > 4);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == n);
}

TEST_CASE("faults: delivery of a committed grant stopped at any statement leaves it in init or delivered") {
  TestDb db;
  db.migrate();
  seed_books(db);
  auto b = engine(db);
  const int64_t n = stop_at_every_statement(
      db,
      [&](int64_t n) {
        auto o = b.engine->claim(request("u" + std::to_string(n), "b" + std::to_string(n), false));
        REQUIRE(o.grant);
        REQUIRE(o.grant->state == rc::GrantState::init);
        return o.grant->id;
      },
      [](Faulty& f, int64_t id) { f.box.engine->deliver(id); },
      [&](int64_t id) {
        CHECK(db.count("SELECT count(*) FROM grants WHERE id = $1 AND state NOT IN ('init', 'success')", {id}) == 0);
      },
      [&](int64_t id) { CHECK(b.engine->deliver(id).state == rc::GrantState::success); });
  CHECK(n > 4);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == n);
}

TEST_CASE("faults: a reversal stopped at any statement gives everything back or nothing") {
  TestDb db;
  db.migrate();
  seed_books(db);
  auto b = engine(db);
  const auto now = [] { return rc::SystemClock().now_ms(); };
  const int64_t n = stop_at_every_statement(
      db,
      [&](int64_t n) {
        auto o = b.engine->claim(request("u" + std::to_string(n), "b" + std::to_string(n), true));
        REQUIRE(o.grant);
        REQUIRE(o.grant->state == rc::GrantState::success);
        return std::make_pair(o.grant->record_code, "refund-" + std::to_string(n));
      },
      [&](Faulty& f, const std::pair<std::string, std::string>& g) {
        rc::engine::reverse(*f.box.store, g.first, "refund", g.second, "test", now());
      },
      [&](const std::pair<std::string, std::string>& g) {
        CHECK(db.count("SELECT count(*) FROM grants WHERE record_code = $1 AND state NOT IN ('success', 'reversed')",
                       {g.first}) == 0);
      },
      [&](const std::pair<std::string, std::string>& g) {
        CHECK(rc::engine::reverse(*b.store, g.first, "refund", g.second, "test", now()).state == "reversed");
      });
  CHECK(n > 4);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'reversed'") == n);
}
