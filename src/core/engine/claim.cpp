// Engine::claim: steps 1-8 of the common flow in one transaction, then delivery (step 9). Each
// step's rule lives in the file named after it; ClaimRun::run is the order they run in.
#include <spdlog/spdlog.h>

#include <chrono>
#include <set>

#include "core/audit.hpp"
#include "core/engine/activity_gate.hpp"
#include "core/engine/budget.hpp"
#include "core/budget_ladder.hpp"
#include "core/engine/catalog.hpp"
#include "core/engine/grant_row.hpp"
#include "core/engine/held.hpp"
#include "core/engine/idempotency.hpp"
#include "core/engine/limits.hpp"
#include "core/engine/prize_selection.hpp"
#include "core/engine/qualification.hpp"
#include "core/engine/reject_stat.hpp"
#include "core/engine/rejection.hpp"
#include "core/engine/risk.hpp"
#include "core/engine/stock.hpp"
#include "util/checked_math.hpp"
#include "util/hash.hpp"

namespace rc::engine {

// One claim's work inside its transaction. A refusing step throws Rejection, a lost twin race
// TwinWon; either rolls the transaction back.
struct ClaimRun {
  Engine& e;
  const ClaimRequest& r;
  store::Tx& tx;
  Millis now;
  GrantView g;
  // Releasing a held grant (held.hpp): its id and record code; the pending row is adopted instead of
  // a new one inserted. 0 for a claim.
  int64_t held_id = 0;
  std::string held_code;
  // The blocked prize that made the last candidate fail with held_by_fuse (the claim is then held).
  std::optional<int64_t> blocked_prize;
  // The budget ladder: the step move of the granted candidate, and whether the candidate before was
  // a high-value prize switched off by the degrade step (the next one is then a budget_degrade).
  std::optional<LadderMove> ladder_move;
  bool budget_degraded = false;
  // claim_many: record the hot-row takes of a direct prize without a ladder instead of making them
  bool defer_hot_rows = false;
  std::optional<HotTake> deferred;
  // deliver a grant whose channel is in the database before the hot rows (claim_step: r.deliver,
  // not a dry run)
  bool deliver_now = false;
  // a lottery's value or a red packet's amount: drawn by the engine, or kept from the one-statement
  // path when it drew under this version (r.drawn_under), never drawn twice for one claim
  Draw draw = [this](int64_t n) { return e.draw_below(n); };
  std::optional<ClaimRequest::Drawn> made_draw = std::nullopt;  // the lottery draw selection made or kept

  void run() {
    // 2. the activity and everything about this user that risk needs, in one round trip
    auto gate = read_gate(tx, r.activity, r.user, r.biz_id);
    // 1. idempotency, answered by the same round trip: a replay has no second effect.
    if (gate && gate->replay_grant_id && *gate->replay_grant_id != held_id) throw TwinWon{};
    if (!gate) {
      if (twin_committed(tx, r.biz_id)) throw TwinWon{};
      throw Rejection{Reason::not_found};
    }
    if (auto why = gate_rejection(*gate, now); why != Reason::none) throw Rejection{why};
    auto cat = e.catalog(tx, r.activity, gate->id, gate->version);

    // 3. qualification (whitelist): unused -> used, decided by the conditional update
    std::optional<int64_t> qual_id;
    if (cat->whitelist_required) qual_id = use_qualification(tx, gate->id, r.user, now);

    // 4. risk
    if (auto why = risk_rejection(*gate); why != Reason::none) throw Rejection{why};
    const std::set<int64_t> blocked = blocked_prizes(tx, *gate);

    // 5. the per-user limit of the activity for the current period, in the activity's zone
    if (cat->limit)
      take_limit(tx, scope_activity(gate->id), r.user, period_key(cat->limit_period, now, cat->timezone), *cat->limit,
                 now);

    // 6. prize selection: the candidates, best first (a lottery degrades to its consolation prize)
    const Selection sel = select_prizes(tx, *cat, r.prize, r.user, now, draw, r.drawn_under(cat->version));
    if (sel.draw_value) made_draw = ClaimRequest::Drawn{cat->version, *sel.draw_value};

    // 6b-8 for each candidate in turn, until one is granted
    Reason last = Reason::sold_out;
    for (size_t ci = 0; ci < sel.candidates.size(); ++ci) {
      const PrizeInfo& p = cat->prizes[sel.candidates[ci]];
      const bool fallback_left = ci + 1 < sel.candidates.size();
      // A prize known sold out in this process is skipped without a write.
      if (e.known_sold_out(p.id)) {
        last = Reason::sold_out;
        continue;
      }
      if (blocked.count(p.id)) {
        last = Reason::held_by_fuse;
        blocked_prize = p.id;
        continue;
      }
      if (fallback_left) tx.exec_script("SAVEPOINT candidate");
      try {
        grant_one(*cat, p, gate->version, sel.draw_value, ci > 0 ? &cat->prizes[sel.candidates[0]] : nullptr, qual_id);
        return;
      } catch (const Rejection& rej) {
        budget_degraded = rej.reason == Reason::budget_degrade;
        last = budget_degraded ? Reason::budget_exhausted : rej.reason;  // what a claim that ends here answers
        if (!fallback_left) throw Rejection{last};
        tx.exec_script("ROLLBACK TO SAVEPOINT candidate");
      }
    }
    throw Rejection{last};
  }

  // Steps 6b-8 for one candidate prize. Throws Rejection when this prize cannot be granted.
  void grant_one(const ActivityCatalog& cat, const PrizeInfo& p, int64_t version, std::optional<int64_t> draw_value,
                 const PrizeInfo* degraded_from, std::optional<int64_t> qual_id) {
    // 5b. the prize's own per-user limit
    if (p.limit) take_limit(tx, scope_prize(p.id), r.user, period_key(p.limit_period, now, cat.timezone), *p.limit, now);
    // 6b. the amount (a red packet's is random, within the budget left)
    const int64_t amount = grant_amount(tx, cat, p, draw, r.drawn_under(cat.version));
    // Refuse before writing anything when this host cannot deliver the prize: a grant must never
    // be stranded (or invalidated) by one host's incomplete [channels] configuration.
    if (!e.opts_.channels.count(p.channel))
      throw Error(Errc::config, "item '" + p.item + "' is delivered by channel '" + p.channel +
                                    "', which is not configured on this host: add [channels." + p.channel + "]");
    auto cost = util::checked_mul(amount, p.unit_cost_cents);
    auto validity_ms = p.validity_days ? util::checked_mul(*p.validity_days, int64_t(86'400'000)) : int64_t(0);
    if (!cost || !validity_ms)
      throw Error(Errc::bad_input, "prize '" + p.code + "': amount x unit cost or validity overflows 64 bits");

    // 7. the grant (init) and its status log; the unique biz_id decides between concurrent twins
    NewGrant ng;
    ng.record_code = held_id ? held_code : new_id("R", now);
    ng.biz_id = r.biz_id;
    ng.activity_id = cat.id;
    ng.prize_id = p.id;
    ng.user = r.user;
    ng.amount = amount;
    ng.cost_cents = *cost;
    ng.bucket = preferred_bucket(r.user, p.buckets);
    ng.draw_value = draw_value;
    ng.pool_version = version;  // every grant records the definition version whose rules it followed
    if (degraded_from) ng.degraded_from = degraded_from->id;
    ng.channel = p.channel;
    ng.source = r.source;
    ng.list_item_id = r.list_item_id;
    if (p.validity_days) ng.expires_at = now + *validity_ms;
    ng.actor = e.opts_.actor;
    const bool by_budget = degraded_from && budget_degraded;
    if (by_budget) ng.reason = name(Reason::budget_degrade);
    ng.why = by_budget       ? name(Reason::budget_degrade)
             : degraded_from ? "draw degraded to consolation"
                             : cat.kind == activity::Kind::lottery ? "draw" : "claim";
    if (held_id) ng.why = "released from a fuse hold: " + ng.why;
    g = GrantView{};
    g.record_code = ng.record_code;
    auto id = held_id ? adopt_held(ng) : insert_grant(tx, ng, now);
    if (!id) {
      if (held_id) throw HeldGone{};
      throw TwinWon{};
    }
    g.id = *id;
    if (qual_id) log_qualification_used(tx, *qual_id, e.opts_.actor, g.record_code, now);

    g.biz_id = r.biz_id;
    g.activity = r.activity;
    g.prize = p.code;
    g.user = r.user;
    g.state = GrantState::init;
    g.item = p.item;
    g.item_kind = p.item_kind;
    g.channel = p.channel;
    g.amount = amount;
    g.cost_cents = *cost;
    g.source = r.source;
    g.draw_value = draw_value;
    g.pool_version = ng.pool_version;
    if (degraded_from) g.degraded_from = degraded_from->code;
    g.reason = ng.reason;
    g.created_at = g.updated_at = now;

    // 9. a channel in the database delivers now, in this transaction, before the hot rows: every
    // concurrent claim of the activity queues on its budget row (and a hot prize's stock row), so
    // those stay locked only for their own updates and the commit. A hot row that refuses rolls
    // the delivery back with the rest of the claim.
    if (deliver_now) e.deliver_in(tx, g);

    // 8. budget, then stock: the hot rows, last (claim_many may take them at the end of its chunk)
    std::optional<LadderMove> moved;
    std::optional<int64_t> got;
    if (defer_hot_rows && cat.kind == activity::Kind::direct && !cat.has_ladder) {
      deferred = HotTake{cat.id, *cost, p.id, ng.bucket, cat.has_budget && *cost > 0};
      got = ng.bucket;
    } else {
      take_hot_rows(cat, p, *cost, ng.bucket, moved, got);
    }
    if (*got != ng.bucket) set_grant_bucket(tx, g.id, *got);
    g.bucket = *got;

    ladder_move = std::move(moved);
  }

  // 8. budget, then stock: conditional updates of the hot rows. Sets the ladder move and the bucket
  // the unit came from; throws Rejection when either does not fit.
  void take_hot_rows(const ActivityCatalog& cat, const PrizeInfo& p, int64_t cost, int64_t bucket,
                     std::optional<LadderMove>& moved, std::optional<int64_t>& got) {
    if (cat.has_ladder) {
      const LadderTake lt{p.high_value, cat.code, e.opts_.actor, now};
      moved = take_budget(tx, cat.id, cost, &lt);
    } else if (cat.has_budget && cost > 0) {
      take_budget(tx, cat.id, cost);
    }
    got = take_stock(tx, p.id, p.buckets, bucket);
    if (!got) {
      e.remember_sold_out(p.id);
      throw Rejection{Reason::sold_out};
    }
  }

  // pending -> init for the held grant, with what the flow chose; nullopt when it is no longer
  // pending (another release or a confirm won). The grant is made now: its created_at becomes the
  // release's time, the time whose periods its limits were just taken in (and a reversal gives
  // them back to), docs/design.md §4.3.
  std::optional<int64_t> adopt_held(const NewGrant& ng) {
    check_version(tx, ng.activity_id, *ng.pool_version);
    if (!transition(tx, held_id, GrantState::pending, GrantState::init, ng.actor, ng.why, now,
                    ", prize_id = $5, amount = $6, cost_cents = $7, bucket = $8, draw_value = $9, pool_version = $10, "
                    "degraded_from = $11, channel = $12, expires_at = $13, reason = $14, created_at = $2",
                    {ng.prize_id, ng.amount, ng.cost_cents, ng.bucket, store::opt(ng.draw_value),
                     store::opt(ng.pool_version), store::opt(ng.degraded_from), ng.channel, store::opt(ng.expires_at),
                     store::opt(ng.reason)}))
      return std::nullopt;
    return held_id;
  }
};

StepResult Engine::claim_step(store::Tx& tx, const ClaimRequest& r, Millis now, bool defer_hot_rows) {
  StepResult step;
  ClaimRun run{*this, r, tx, now, {}, 0, {}, std::nullopt, std::nullopt, false, defer_hot_rows, std::nullopt};
  run.deliver_now = r.deliver && !r.dry_run;
  try {
    run.run();
    step.kind = StepResult::granted;
    step.grant = std::move(run.g);
    step.ladder = std::move(run.ladder_move);
    step.deferred = run.deferred;
  } catch (const Rejection& rej) {
    // On PostgreSQL a concurrent twin (same biz_id) that committed while we waited on its
    // limit or qualification row makes our conditional update fail: that is a replay, not a
    // rejection. Our own grant row (inserted before a later step failed) is not a twin.
    if (twin_committed(tx, r.biz_id, run.g.id)) {
      step.kind = StepResult::twin;
    } else {
      step.kind = StepResult::rejected;
      step.reason = rej.reason;
      step.blocked_prize = run.blocked_prize;
      step.drawn = run.made_draw;
    }
  } catch (const TwinWon&) {
    step.kind = StepResult::twin;
  }
  return step;
}

GrantView run_held_steps(Engine& e, const ClaimRequest& r, store::Tx& tx, Millis now, int64_t held_id,
                         const std::string& record_code, std::optional<LadderMove>* moved,
                         std::optional<int64_t>* blocked_prize, std::optional<HotTake>* deferred, bool deliver_now) {
  ClaimRun run{e, r, tx, now, {}, held_id, record_code, std::nullopt, std::nullopt, false, deferred != nullptr,
               std::nullopt};
  run.deliver_now = deliver_now;
  try {
    run.run();
  } catch (const Rejection&) {
    if (blocked_prize) *blocked_prize = run.blocked_prize;
    throw;
  }
  if (moved) *moved = std::move(run.ladder_move);
  if (deferred) *deferred = run.deferred;
  return run.g;
}

ClaimOutcome Engine::claim(const ClaimRequest& request) {
  auto t0 = std::chrono::steady_clock::now();
  ClaimOutcome out;
  const Millis now = clock_.now_ms();
  // PostgreSQL: the common claim in one round trip, when it grants (claim_one.hpp). A lottery it
  // drew for keeps that draw in the full flow below.
  std::optional<ClaimRequest::Drawn> drawn;
  std::optional<GrantView> one = claim_in_one(request, now, drawn);
  // the request as the full flow runs it: with the draw the one statement made (never drawn twice)
  ClaimRequest r = request;
  if (drawn && !r.drawn) r.drawn = drawn;
  auto finish = [&]() -> ClaimOutcome {
    out.duration_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    spdlog::log(opts_.claim_log_level, "claim activity={} user={} biz_id={} outcome={}{}{} duration_us={}", r.activity, r.user, r.biz_id,
                 status_name(out.status), out.reason == Reason::none ? "" : std::string(" reason=") + name(out.reason),
                 out.grant ? " record=" + out.grant->record_code + " state=" + name(out.grant->state) : "", out.duration_us);
    return out;
  };
  if (one) {
    out.status = Status::granted;
    out.grant = std::move(one);
    // 9. a remote channel (webhook) delivers after the commit, as below
    if (r.deliver && out.grant->state == GrantState::init) deliver_after_commit(out);
    return finish();
  }
  // Steps 1-8 in one transaction; a request a fuse stopped is held, or runs again (decide_hold).
  for (int reruns = 0;; ++reruns) {
    bool twin = false;
    std::optional<GrantView> granted;
    std::optional<int64_t> blocked_prize;
    std::optional<ClaimRequest::Drawn> held_draw;
    std::optional<LadderMove> ladder;
    try {
      st_.transact(store::TxMode::write, [&](store::Tx& tx) {
        twin = false;
        granted.reset();
        ladder.reset();
        out.reason = Reason::none;
        StepResult step = claim_step(tx, r, now);
        if (step.kind == StepResult::granted) {
          granted = std::move(step.grant);
          ladder = std::move(step.ladder);
          // 9. a channel in the database delivered in this transaction (claim_step): one commit for both
          if (r.dry_run) tx.rollback_only();
        } else {
          twin = step.kind == StepResult::twin;
          out.reason = step.reason;
          blocked_prize = step.blocked_prize;
          held_draw = step.drawn;
          tx.rollback_only();
        }
      });
    } catch (const store::UniqueViolation&) {
      twin = true;  // the unique key decided against us outside ON CONFLICT (e.g. record_code): treat as twin
    }
    if (twin) {
      // 1. idempotency: a replay must never have a second effect, whatever else has changed.
      auto g = find_grant_by_biz(st_.autocommit(), r.biz_id);
      if (!g) throw Error(Errc::busy, "biz_id " + r.biz_id + " collided with a twin that is gone: try again");
      answer_replay(r, *g, out);
      // A retry after a crash between the claim's commit and its delivery finishes the delivery.
      if (out.status == Status::replayed && g->state == GrantState::init && r.deliver && !r.dry_run)
        deliver_after_commit(out);
      return finish();
    }
    if (!granted && out.reason == Reason::held_by_fuse) {
      // 4. a fuse holds the request: recorded as a pending grant that has taken nothing (held.cpp),
      // with the lottery draw it made, which its release keeps (a hold never buys a second draw)
      // (only a draw the step made: none when the hold came before selection, and a red packet's
      // amount, drawn after selection, is not the held request's)
      ClaimRequest held = r;
      held.drawn = held_draw;
      const int verdict = hold(held, now, blocked_prize, reruns, out);
      if (verdict == HoldDecision::hold) return finish();
      if (verdict == HoldDecision::run_again) {
        // the event was released between the claim's transaction and the hold: the flow again,
        // keeping whatever this run drew
        if (held_draw) r.drawn = held_draw;
        continue;
      }
    }
    if (!granted) {
      out.status = Status::rejected;
      if (!r.dry_run) count_rejection(st_, r.activity, out.reason, now);
      return finish();
    }
    out.status = Status::granted;
    out.grant = granted;
    out.dry_run = r.dry_run;
    out.ladder = ladder;
    // 9. a remote channel (webhook) delivers after the commit; an in-database one already has
    if (r.deliver && !r.dry_run && out.grant->state == GrantState::init) deliver_after_commit(out);
    // committed: the log line and the alert, once - after the user's delivery, so that a slow alert
    // webhook never delays it (a crash before the post leaves the alert queued for fuse-scan)
    if (ladder && !r.dry_run) announce_ladder(*ladder);
    return finish();
  }
}

void Engine::deliver_after_commit(ClaimOutcome& out) {
  // The grant is committed: a delivery problem now is logged and left to the resend path; it
  // never turns the claim's answer into a failure.
  try {
    deliver(out.grant->id);
  } catch (const Error& e) {
    spdlog::warn("record={} committed but not delivered: {}", out.grant->record_code, e.what());
  }
  if (auto g = find_grant(st_.autocommit(), out.grant->record_code)) out.grant = g;
}

}  // namespace rc::engine
