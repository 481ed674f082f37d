// Held requests: recording a claim a fuse stops (Engine::hold), and deciding one later
// (Engine::release_held, cancel_held). See held.hpp for the contract.
#include "core/engine/held.hpp"

#include <spdlog/spdlog.h>

#include "core/audit.hpp"
#include "core/engine/idempotency.hpp"
#include "core/engine/rejection.hpp"
#include "util/hash.hpp"

namespace rc::engine {

std::optional<int64_t> blocking_event(store::Session& s, int64_t activity_id, std::optional<int64_t> prize_id) {
  // FOR SHARE (PostgreSQL): a release's UPDATE of the event waits for the transaction that holds a
  // request under it, so the release's pass over the held requests, after its commit, sees that
  // request; and a hold that waited for a release re-reads the event as released and finds nothing.
  // (SQLite serializes the two write transactions anyway.)
  auto r = s.query(
      "SELECT id FROM fuse_event WHERE activity_id = $1 AND state = 'tripped' AND "
      "(prize_id IS NULL OR prize_id = $2) ORDER BY CASE WHEN prize_id IS NULL THEN 0 ELSE 1 END, id LIMIT 1" +
          s.lock_rows(store::Lock::share),
      {activity_id, store::opt(prize_id)});
  if (r.empty()) return std::nullopt;
  return r[0].i64(0);
}

HoldDecision decide_hold(store::Session& s, const std::string& activity_code, std::optional<int64_t> blocked_prize,
                         int reruns_done) {
  HoldDecision d;
  auto a = s.query("SELECT id FROM activity WHERE code = $1", {activity_code});
  if (!a.empty()) {
    d.activity_id = a[0].i64(0);
    if (auto ev = blocking_event(s, d.activity_id, blocked_prize)) {
      d.verdict = HoldDecision::hold;
      d.event = *ev;
      return d;
    }
  }
  d.verdict = reruns_done < kHoldReruns ? HoldDecision::run_again : HoldDecision::give_up;
  return d;
}

std::vector<int64_t> held_grants(store::Session& s, int64_t event_id, int64_t after, int64_t limit) {
  auto r = s.query("SELECT id FROM grants WHERE fuse_event_id = $1 AND state = 'pending' AND id > $2 ORDER BY id LIMIT $3",
                   {event_id, after, limit});
  std::vector<int64_t> out;
  for (auto& row : r.rows) out.push_back(row.i64(0));
  return out;
}

std::optional<int64_t> insert_held(store::Session& s, const ClaimRequest& r, int64_t activity_id, int64_t event_id,
                                   const std::string& actor, Millis now) {
  // The prize the caller asked for, so that the release replays the same request.
  std::optional<int64_t> asked;
  if (r.prize) {
    auto p = s.query("SELECT id FROM prize WHERE activity_id = $1 AND code = $2", {activity_id, *r.prize});
    if (!p.empty()) asked = p[0].i64(0);
  }
  // A lottery's draw, with the version it was drawn under, so that the release keeps it.
  std::optional<int64_t> draw_value, draw_version;
  if (r.drawn) draw_value = r.drawn->value, draw_version = r.drawn->version;
  auto ins = s.query(
      "INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state, source, "
      "list_item_id, reason, fuse_event_id, draw_value, pool_version, created_at, updated_at) VALUES ($1, $2, $3, $4, "
      "$5, 0, 0, 'pending', $6, $7, $12, $8, $9, $10, $11, $11) ON CONFLICT (biz_id) DO NOTHING RETURNING id",
      {new_id("R", now), r.biz_id, activity_id, store::opt(asked), r.user, store::opt(r.source),
       store::opt(r.list_item_id), event_id, store::opt(draw_value), store::opt(draw_version), now,
       name(Reason::held_by_fuse)});
  if (ins.empty()) return std::nullopt;
  const int64_t id = ins[0].i64(0);
  log_created(s, id, GrantState::pending, actor, name(Reason::held_by_fuse), now);
  return id;
}

bool follow_held_item(store::Session& s, int64_t grant_id, ListItemState from, ListItemState to,
                      const std::optional<std::string>& reason, const std::string& actor, Millis now) {
  auto g = s.query("SELECT list_item_id FROM grants WHERE id = $1", {grant_id});
  if (g.empty() || g[0].is_null(0)) return false;
  const std::string extra = to == ListItemState::failed ? ", error = $5" : ", reason = $5";
  return transition(s, g[0].i64(0), from, to, actor, reason, now, extra,
                    {store::opt(reason)});
}

int64_t cancel_held(store::Session& s, int64_t event_id, const std::string& reason, const std::string& actor, Millis now) {
  auto moved = s.query(
      "UPDATE grants SET state = 'cancelled', reason = $1, updated_at = $2 WHERE fuse_event_id = $3 AND state = 'pending' "
      "RETURNING id",
      {"fuse_confirmed: " + reason, now, event_id});
  for (auto& row : moved.rows) {
    const int64_t grant_id = row.i64(0);
    log_moved(s, grant_id, GrantState::pending, GrantState::cancelled, actor, "fuse confirmed: " + reason, now);
    follow_held_item(s, grant_id, ListItemState::held, ListItemState::cancelled, "fuse_confirmed: " + reason, actor,
                     now);
  }
  return int64_t(moved.size());
}

int Engine::hold(const ClaimRequest& r, Millis now, std::optional<int64_t> blocked_prize, int reruns_done,
                 ClaimOutcome& out) {
  HoldDecision d;
  bool twin = false;
  st_.transact(store::TxMode::write, [&](store::Tx& tx) {
    twin = false;
    d = decide_hold(tx, r.activity, blocked_prize, reruns_done);
    if (d.verdict != HoldDecision::hold || r.dry_run) return tx.rollback_only();
    if (!insert_held(tx, r, d.activity_id, d.event, opts_.actor, now)) {
      twin = true;  // a twin with this biz_id committed first
      return tx.rollback_only();
    }
  });
  if (d.verdict != HoldDecision::hold) return d.verdict;
  out.reason = Reason::held_by_fuse;
  if (r.dry_run) {
    out.status = Status::held;
    out.dry_run = true;
    return d.verdict;
  }
  auto g = find_grant_by_biz(st_.autocommit(), r.biz_id);
  if (!g) throw Error(Errc::busy, "biz_id " + r.biz_id + " was held but its grant is gone: try again");
  if (twin) {
    out.reason = Reason::none;
    answer_replay(r, *g, out);
  } else {
    out.status = Status::held;
    out.grant = g;
  }
  return d.verdict;
}

namespace {

// A held grant and the request it stands for, as release_held replays it.
struct HeldGrant {
  std::string record_code;
  GrantState state = GrantState::pending;
  ClaimRequest request;  // biz_id, activity, prize (the one asked for), user, source, list_item_id, drawn
  int64_t activity_id = 0;
  std::optional<int64_t> prize_id;
};

std::optional<HeldGrant> find_held_grant(store::Store& s, int64_t grant_id) {
  auto h = s.query(
      "SELECT g.record_code, g.biz_id, a.code, p.code, g.user_id, g.source, g.list_item_id, g.state, g.activity_id, "
      "g.prize_id, g.draw_value, g.pool_version FROM grants g JOIN activity a ON a.id = g.activity_id "
      "LEFT JOIN prize p ON p.id = g.prize_id "
      "WHERE g.id = $1",
      {grant_id});
  if (h.empty()) return std::nullopt;
  const auto& x = h[0];
  HeldGrant g;
  g.record_code = x.str(0);
  g.request.biz_id = x.str(1);
  g.request.activity = x.str(2);
  g.request.prize = x.opt_str(3);
  g.request.user = x.str(4);
  g.request.source = x.opt_str(5);
  g.request.list_item_id = x.opt_i64(6);
  g.state = state_from_db<GrantState>(x.str(7));
  g.activity_id = x.i64(8);
  g.prize_id = x.opt_i64(9);
  // the lottery draw the held request made: kept by the release under the same version
  if (!x.is_null(10) && !x.is_null(11)) g.request.drawn = ClaimRequest::Drawn{x.i64(11), x.i64(10)};
  return g;
}

}  // namespace

HeldResult Engine::release_held(int64_t grant_id, bool dry_run) {
  HeldResult res;
  const auto held = find_held_grant(st_, grant_id);
  if (!held) throw Error(Errc::internal, "held grant " + std::to_string(grant_id) + " not found");
  res.record_code = held->record_code;
  res.state = name(held->state);
  if (held->state != GrantState::pending) {
    res.result = "decided";
    return res;
  }
  ClaimRequest r = held->request;
  r.dry_run = dry_run;
  const Millis now = clock_.now_ms();

  // A release and the fuses can race: the flow can be stopped by another fuse that is released
  // again before the follow-up below looks for it (decide_hold, as for a claim).
  for (int reruns = 0;; ++reruns) {
    std::optional<GrantView> granted;
    std::optional<LadderMove> ladder;
    std::optional<int64_t> stopped_by;  // held_by_fuse: the prize whose fuse stopped the flow (none: the activity's)
    Reason why = Reason::none;
    bool gone = false;
    st_.transact(store::TxMode::write, [&](store::Tx& tx) {
      granted.reset();
      ladder.reset();
      stopped_by.reset();
      why = Reason::none;
      gone = false;
      try {
        granted = run_held_steps(*this, r, tx, now, grant_id, res.record_code, &ladder, &stopped_by);
        if (dry_run) tx.rollback_only();
        else follow_held_item(tx, grant_id, ListItemState::held, ListItemState::issued, std::nullopt, opts_.actor, now);
      } catch (const Rejection& rej) {
        why = rej.reason;
        tx.rollback_only();
      } catch (const HeldGone&) {
        gone = true;
        tx.rollback_only();
      }
    });
    if (gone) {
      res.result = "decided";
      res.state = current_state(st_.autocommit(), grant_id);
      return res;
    }
    if (granted) {
      res.result = dry_run ? "would_grant" : "granted";
      res.state = name(GrantState::init);
      if (!dry_run) {
        ClaimOutcome o;
        o.grant = granted;
        deliver_after_commit(o);
        res.state = name(o.grant->state);
        if (o.grant->state == GrantState::failed)  // a definite "no" from the channel: the item says so too
          st_.transact(store::TxMode::write, [&](store::Tx& tx) {
            follow_held_item(tx, grant_id, ListItemState::issued, ListItemState::failed, "delivery failed", opts_.actor,
                             clock_.now_ms());
          });
        if (ladder) announce_ladder(*ladder);  // after the delivery, as a claim does
      }
      return res;
    }
    res.reason = why;
    if (dry_run) {
      res.result = why == Reason::held_by_fuse ? "still_held" : "would_reject";
      return res;
    }
    bool again = false;
    st_.transact(store::TxMode::write, [&](store::Tx& tx) {
      res.result = "decided";
      again = false;
      if (why == Reason::held_by_fuse) {
        // Another open event still blocks it: it stays held, by that event (no state change). The
        // event is looked for on the prize whose fuse stopped the flow (a request that named no
        // prize is stopped by the prize its selection chose), as Engine::claim holds it. None: run
        // again, or, past the bound, stay held by its event for that event's next release.
        const HoldDecision d = decide_hold(tx, r.activity, stopped_by ? stopped_by : held->prize_id, reruns);
        if (d.verdict == HoldDecision::run_again) {
          again = true;
          return;
        }
        if (d.verdict == HoldDecision::give_up ||
            tx.exec("UPDATE grants SET fuse_event_id = $1, updated_at = $2 WHERE id = $3 AND state = 'pending'",
                    {d.event, now, grant_id}) == 1) {
          res.result = "still_held";
          res.reason = Reason::held_by_fuse;
          return;
        }
      }
      // The world changed while it was held: rejected with the claim's reason, once.
      if (transition(tx, grant_id, GrantState::pending, GrantState::invalid, opts_.actor,
                     std::string("released from a fuse hold, rejected: ") + name(why), now, ", reason = $5",
                     {name(why)})) {
        res.result = "rejected";
        follow_held_item(tx, grant_id, ListItemState::held, ListItemState::rejected, std::string(name(why)),
                         opts_.actor, now);
      }
    });
    if (again) continue;
    break;
  }
  res.state = current_state(st_.autocommit(), grant_id);
  spdlog::info("held record={} result={}{} state={}", res.record_code, res.result,
               res.reason == Reason::none ? "" : std::string(" reason=") + name(res.reason), res.state);
  return res;
}

}  // namespace rc::engine
