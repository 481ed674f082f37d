// Engine::claim_many: the common flow for many requests in one transaction (list-issue's chunks).
// One commit for many grants is what makes a batch of a million users affordable; the rules are
// not repeated here: each request goes through the same claim_step as Engine::claim.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <set>

#include "core/engine/budget.hpp"
#include "core/engine/claim_one.hpp"
#include "core/engine/deferred_takes.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/grant_view.hpp"
#include "core/engine/held.hpp"
#include "core/engine/idempotency.hpp"
#include "core/engine/rejection.hpp"
#include "core/engine/stock.hpp"

namespace rc::engine {

std::vector<ClaimOutcome> Engine::claim_many(store::Tx& tx, const std::vector<ClaimRequest>& rs) {
  // Every chunk locks its users' rows (limit counters, accounts) in one order, by user, bytewise -
  // the full flow request by request as the statement does (ORDER BY ... COLLATE "C") - so two
  // chunks with users in common never wait on each other crosswise: batches of overlapping lists
  // running at once deadlocked until their runs gave up. The outcomes go back in request order.
  std::vector<size_t> order(rs.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rs[a].user < rs[b].user; });
  if (std::is_sorted(order.begin(), order.end())) return claim_in_user_order(tx, rs);
  std::vector<ClaimRequest> sorted;
  sorted.reserve(rs.size());
  for (size_t i : order) sorted.push_back(rs[i]);
  auto done = claim_in_user_order(tx, sorted);
  std::vector<ClaimOutcome> outs(rs.size());
  for (size_t k = 0; k < order.size(); ++k) outs[order[k]] = std::move(done[k]);
  return outs;
}

std::vector<ClaimOutcome> Engine::claim_in_user_order(store::Tx& tx, const std::vector<ClaimRequest>& rs) {
  // A chunk that did not fit ran its requests twice: with the budget run out, every chunk of the
  // rest of a batch would (19,900 budget_exhausted items took 27 s instead of 16). So the chunks of
  // an activity whose last chunk did not fit take as they go for a while (known_uncovered).
  if (rs.size() < 2 || known_uncovered(rs.front().activity)) return claim_each(tx, rs, nullptr);
  // PostgreSQL: the whole chunk in one statement when every request is granted (claim_one.hpp).
  // After a chunk of the activity it refused, the next ones skip it for a while: a list whose
  // chunks each hold a user it refuses would pay the statement and then the full flow every time.
  if (!known_chunk_refused(rs.front().activity)) {
    if (auto outs = claim_chunk_in_one(tx, rs, clock_.now_ms())) return std::move(*outs);
  }
  // The hot rows once, at the end (engine.hpp); a chunk they do not cover runs again taking as it goes.
  tx.exec_script("SAVEPOINT claim_chunk");
  std::vector<HotTake> takes;
  auto outs = claim_each(tx, rs, &takes);
  if (take_deferred(tx, takes)) {
    tx.exec_script("RELEASE SAVEPOINT claim_chunk");
    return outs;
  }
  tx.exec_script("ROLLBACK TO SAVEPOINT claim_chunk");
  tx.exec_script("RELEASE SAVEPOINT claim_chunk");
  remember_uncovered(rs.front().activity);
  lock_buckets(tx, takes);
  return claim_each(tx, rs, nullptr);
}

std::vector<ClaimOutcome> Engine::claim_each(store::Tx& tx, const std::vector<ClaimRequest>& rs,
                                             std::vector<HotTake>* defer) {
  std::vector<ClaimOutcome> outs;
  outs.reserve(rs.size());
  const Millis now = clock_.now_ms();
  for (const auto& r : rs) {
    auto t0 = std::chrono::steady_clock::now();
    ClaimOutcome out;
    // A savepoint per request: a rejection after a write (limit counter, grant row, budget) must
    // undo that request's writes and nothing of the requests before it. The previous request's
    // savepoint is released in the same round trip.
    tx.exec_script(&r == &rs.front() ? "SAVEPOINT claim_item" : "RELEASE SAVEPOINT claim_item; SAVEPOINT claim_item");
    StepResult step = claim_step(tx, r, now, defer != nullptr);
    // 4. a fuse holds the request: recorded as a pending grant in this transaction (held.cpp);
    // a twin's grant answers as below. When the event was released since the step looked
    // (PostgreSQL, read committed), the request goes through the flow again, as decide_hold says
    // for every flow (held.hpp).
    for (int reruns = 0; step.kind == StepResult::rejected && step.reason == Reason::held_by_fuse; ++reruns) {
      tx.exec_script("ROLLBACK TO SAVEPOINT claim_item");
      const HoldDecision d = decide_hold(tx, r.activity, step.blocked_prize, reruns);
      // (with the draw the step made, which the release keeps, as claim() holds: Engine::claim)
      ClaimRequest with_draw = r;
      with_draw.drawn = step.drawn;
      if (d.verdict == HoldDecision::give_up || (d.verdict == HoldDecision::hold && r.dry_run)) break;
      if (d.verdict == HoldDecision::hold) {
        if (insert_held(tx, with_draw, d.activity_id, d.event, opts_.actor, now)) {
          out.status = Status::held;
          out.reason = Reason::held_by_fuse;
          out.grant = find_grant_by_biz(tx, r.biz_id);
        } else {
          step.kind = StepResult::twin;
        }
        break;
      }
      if (!step.drawn) with_draw.drawn = r.drawn;  // (a draw brought along stays; none is made twice)
      step = claim_step(tx, with_draw, now, defer != nullptr);
    }
    const bool held = out.status == Status::held;
    if (held) {
      // answered above: the savepoint keeps the held grant
    } else if (step.kind == StepResult::granted) {
      if (step.deferred) defer->push_back(*step.deferred);
      out.status = Status::granted;
      out.grant = std::move(step.grant);
      out.ladder = std::move(step.ladder);  // the caller announces it after its commit
    } else {
      tx.exec_script("ROLLBACK TO SAVEPOINT claim_item");
      if (step.kind == StepResult::rejected) {
        out.status = Status::rejected;
        out.reason = step.reason;
      } else {
        // 1. idempotency: the grant an earlier run (or a twin) made for this biz_id is the answer.
        auto g = find_grant_by_biz(tx, r.biz_id);
        if (!g) throw Error(Errc::busy, "biz_id " + r.biz_id + " collided with a twin that is gone: try again");
        answer_replay(r, *g, out);
      }
    }
    // Delivery inside the same transaction when the channel is in the database; a replay left in
    // init by a crash after its commit is delivered now too.
    if (r.deliver && out.grant) deliver_in(tx, *out.grant);
    out.duration_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    spdlog::debug("claim activity={} user={} biz_id={} outcome={}{}{} duration_us={}", r.activity, r.user, r.biz_id,
                  status_name(out.status), out.reason == Reason::none ? "" : std::string(" reason=") + name(out.reason),
                  out.grant ? " record=" + out.grant->record_code : "", out.duration_us);
    outs.push_back(std::move(out));
  }
  if (!rs.empty()) tx.exec_script("RELEASE SAVEPOINT claim_item");
  return outs;
}

}  // namespace rc::engine
