// decide_hold (core/engine/held.hpp): the one rule for a request a fuse stopped, shared by
// Engine::claim, claim_many and release_held - hold by the blocking event, run again while none
// blocks (at most kHoldReruns times), then give up - decided on the real database.
#include <doctest/doctest.h>

#include "core/engine/held.hpp"
#include "support/harness.hpp"
#include "support/seed.hpp"

using rc::engine::decide_hold;
using rc::engine::HoldDecision;
using rc::engine::kHoldReruns;

TEST_CASE("hold decision: held by the blocking event, run again while none blocks, at most kHoldReruns times") {
  rt::TestDb db;
  db.ok({"db", "migrate"});
  rt::seed(db, rt::Spec{});
  auto st = db.open();
  const int64_t activity = st->query("SELECT id FROM activity WHERE code = 'act'").rows.at(0).i64(0);
  const int64_t prize = st->query("SELECT id FROM prize WHERE activity_id = $1", {activity}).rows.at(0).i64(0);
  auto decide = [&](std::optional<int64_t> blocked, int reruns) {
    HoldDecision d;
    st->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
      d = decide_hold(tx, "act", blocked, reruns);
      tx.rollback_only();
    });
    return d;
  };
  // nothing blocks: run again, then give up past the bound (the same bound for every flow)
  REQUIRE(kHoldReruns >= 1);
  for (int r = 0; r < kHoldReruns; ++r) CHECK(decide(prize, r).verdict == HoldDecision::run_again);
  CHECK(decide(prize, kHoldReruns).verdict == HoldDecision::give_up);
  CHECK(decide(std::nullopt, kHoldReruns + 5).verdict == HoldDecision::give_up);
  // an unknown activity is never held
  st->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
    CHECK(decide_hold(tx, "no_such_activity", std::nullopt, 0).verdict == HoldDecision::run_again);
    CHECK(decide_hold(tx, "no_such_activity", std::nullopt, kHoldReruns).verdict == HoldDecision::give_up);
    tx.rollback_only();
  });

  // a tripped event on the prize holds a request for that prize, whatever the reruns, and not one
  // for the activity as a whole
  st->exec("INSERT INTO fuse_event (batch_no, activity_id, prize_id, state, observed_count, observed_amount, reason, "
           "created_at) VALUES ('F-prize', $1, $2, 'tripped', 6, 600, 'test', 0)",
           {activity, prize});
  const int64_t on_prize = st->query("SELECT id FROM fuse_event WHERE batch_no = 'F-prize'").rows.at(0).i64(0);
  for (int r : {0, kHoldReruns, kHoldReruns + 3}) {
    auto d = decide(prize, r);
    CHECK(d.verdict == HoldDecision::hold);
    CHECK(d.event == on_prize);
    CHECK(d.activity_id == activity);
  }
  CHECK(decide(std::nullopt, 0).verdict == HoldDecision::run_again);
  // an activity-wide event comes first, for a prize and for the activity
  st->exec("INSERT INTO fuse_event (batch_no, activity_id, prize_id, state, observed_count, observed_amount, reason, "
           "created_at) VALUES ('F-all', $1, NULL, 'tripped', 6, 600, 'test', 0)",
           {activity});
  const int64_t on_all = st->query("SELECT id FROM fuse_event WHERE batch_no = 'F-all'").rows.at(0).i64(0);
  CHECK(decide(prize, 0).event == on_all);
  CHECK(decide(std::nullopt, 0).event == on_all);
  // released events hold nothing
  st->exec("UPDATE fuse_event SET state = 'released', released_at = 1 WHERE activity_id = $1", {activity});
  CHECK(decide(prize, 0).verdict == HoldDecision::run_again);
  CHECK(decide(prize, kHoldReruns).verdict == HoldDecision::give_up);
}
