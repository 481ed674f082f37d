// Held requests: recording a claim a fuse stops (Engine::hold), and deciding one later
// (Engine::release_held, cancel_held). See held.hpp for the contract.
#include "core/engine/held.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "core/audit.hpp"
#include "core/engine/deferred_takes.hpp"
#include "core/engine/grant_view.hpp"
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

// A held grant and the request it stands for, as a release replays it.
struct HeldGrant {
  int64_t id = 0;
  std::string record_code;
  GrantState state = GrantState::pending;
  ClaimRequest request;  // biz_id, activity, prize (the one asked for), user, source, list_item_id, drawn
  int64_t activity_id = 0;
  std::optional<int64_t> prize_id;
};

// The grants `ids`, in one round trip (absent ids are left out).
std::vector<HeldGrant> find_held_grants(store::Session& s, const std::vector<int64_t>& ids) {
  std::string in;
  store::Params params;
  for (int64_t id : ids) {
    in += (in.empty() ? "$" : ", $") + std::to_string(params.size() + 1);
    params.push_back(id);
  }
  auto h = s.query(
      "SELECT g.id, g.record_code, g.biz_id, a.code, p.code, g.user_id, g.source, g.list_item_id, g.state, "
      "g.activity_id, g.prize_id, g.draw_value, g.pool_version FROM grants g JOIN activity a ON a.id = g.activity_id "
      "LEFT JOIN prize p ON p.id = g.prize_id WHERE g.id IN (" + in + ")",
      params);
  std::vector<HeldGrant> out;
  for (const auto& x : h.rows) {
    HeldGrant g;
    g.id = x.i64(0);
    g.record_code = x.str(1);
    g.request.biz_id = x.str(2);
    g.request.activity = x.str(3);
    g.request.prize = x.opt_str(4);
    g.request.user = x.str(5);
    g.request.source = x.opt_str(6);
    g.request.list_item_id = x.opt_i64(7);
    g.state = state_from_db<GrantState>(x.str(8));
    g.activity_id = x.i64(9);
    g.prize_id = x.opt_i64(10);
    // the lottery draw the held request made: kept by the release under the same version
    if (!x.is_null(11) && !x.is_null(12)) g.request.drawn = ClaimRequest::Drawn{x.i64(12), x.i64(11)};
    out.push_back(std::move(g));
  }
  return out;
}

// One held grant's outcome inside the chunk: the result, and what the caller does after the commit.
struct Released {
  HeldResult res;
  std::optional<GrantView> granted;
  std::optional<LadderMove> ladder;
};

// Decides one held grant h inside the chunk's transaction, under its own savepoint (held.hpp): the
// flow again; on a refusal, rolled back to the savepoint and decided by the refusal: held by the
// event that blocks it now, run again (the fuse that stopped it was released meanwhile), or
// rejected with the claim's reason. `defer`: the hot-row take is collected instead of made.
Released release_one(Engine& e, store::Tx& tx, const HeldGrant& h, Millis now, bool dry_run,
                     std::vector<HotTake>* defer, const std::string& actor) {
  Released out;
  HeldResult& res = out.res;
  res.record_code = h.record_code;
  res.state = name(h.state);
  if (h.state != GrantState::pending) {
    res.result = "decided";
    return out;
  }
  ClaimRequest r = h.request;
  r.dry_run = dry_run;
  for (int reruns = 0;; ++reruns) {
    std::optional<int64_t> stopped_by;  // held_by_fuse: the prize whose fuse stopped the flow (none: the activity's)
    std::optional<HotTake> take;
    Reason why = Reason::none;
    try {
      GrantView g = run_held_steps(e, r, tx, now, h.id, h.record_code, &out.ladder, &stopped_by,
                                   defer ? &take : nullptr, !dry_run);
      if (take) defer->push_back(*take);
      if (!dry_run && h.request.list_item_id)
        follow_held_item(tx, h.id, ListItemState::held, ListItemState::issued, std::nullopt, actor, now);
      res.result = dry_run ? "would_grant" : "granted";
      res.state = name(g.state);
      out.granted = std::move(g);
      return out;
    } catch (const Rejection& rej) {
      why = rej.reason;
    } catch (const HeldGone&) {
      tx.exec_script("ROLLBACK TO SAVEPOINT release_item");
      res.result = "decided";
      res.state = current_state(tx, h.id);
      return out;
    }
    tx.exec_script("ROLLBACK TO SAVEPOINT release_item");
    out.ladder.reset();
    res.reason = why;
    if (dry_run) {
      res.result = why == Reason::held_by_fuse ? "still_held" : "would_reject";
      return out;
    }
    res.result = "decided";
    if (why == Reason::held_by_fuse) {
      // Another open event still blocks it: it stays held, by that event (no state change). The
      // event is looked for on the prize whose fuse stopped the flow (a request that named no
      // prize is stopped by the prize its selection chose), as Engine::claim holds it. None: run
      // again, or, past the bound, stay held by its event for that event's next release.
      const HoldDecision d = decide_hold(tx, r.activity, stopped_by ? stopped_by : h.prize_id, reruns);
      if (d.verdict == HoldDecision::run_again) continue;
      if (d.verdict == HoldDecision::give_up ||
          tx.exec("UPDATE grants SET fuse_event_id = $1, updated_at = $2 WHERE id = $3 AND state = 'pending'",
                  {d.event, now, h.id}) == 1) {
        res.result = "still_held";
        res.reason = Reason::held_by_fuse;
        return out;
      }
    }
    // The world changed while it was held: rejected with the claim's reason, once.
    if (transition(tx, h.id, GrantState::pending, GrantState::invalid, actor,
                   std::string("released from a fuse hold, rejected: ") + name(why), now, ", reason = $5",
                   {name(why)})) {
      res.result = "rejected";
      res.state = name(GrantState::invalid);
      if (h.request.list_item_id)
        follow_held_item(tx, h.id, ListItemState::held, ListItemState::rejected, std::string(name(why)), actor, now);
    } else {
      res.state = current_state(tx, h.id);
    }
    return out;
  }
}

}  // namespace

HeldResult Engine::release_held(int64_t grant_id, bool dry_run) {
  auto out = release_held_many({grant_id}, dry_run);
  if (out.empty()) throw Error(Errc::internal, "held grant " + std::to_string(grant_id) + " not found");
  return out.front();
}

std::vector<HeldResult> Engine::release_held_many(const std::vector<int64_t>& ids, bool dry_run) {
  if (ids.empty()) return {};
  std::vector<HeldGrant> held = find_held_grants(st_.autocommit(), ids);
  // One lock order for every chunk, by user (bytewise) as claim_many's, so that two releases (or a
  // release and a list-issue chunk) with users in common never wait on each other crosswise.
  std::stable_sort(held.begin(), held.end(), [](const HeldGrant& a, const HeldGrant& b) {
    return a.request.user < b.request.user || (a.request.user == b.request.user && a.id < b.id);
  });
  const Millis now = clock_.now_ms();
  std::vector<Released> done;
  auto pass = [&](store::Tx& tx, std::vector<HotTake>* defer) {
    done.clear();
    for (const auto& h : held) {
      // one savepoint per request, the previous one released in the same round trip
      tx.exec_script(done.empty() ? "SAVEPOINT release_item" : "RELEASE SAVEPOINT release_item; SAVEPOINT release_item");
      done.push_back(release_one(*this, tx, h, now, dry_run, defer, opts_.actor));
    }
    tx.exec_script("RELEASE SAVEPOINT release_item");
  };
  st_.transact(store::TxMode::write, [&](store::Tx& tx) {
    // The hot rows once, at the chunk's end, as claim_many takes them (engine.hpp); a chunk they do
    // not cover runs again taking as it goes, so that each request gets the answer a claim gets.
    tx.exec_script("SAVEPOINT release_chunk");
    std::vector<HotTake> takes;
    pass(tx, &takes);
    if (take_deferred(tx, takes)) {
      tx.exec_script("RELEASE SAVEPOINT release_chunk");
    } else {
      tx.exec_script("ROLLBACK TO SAVEPOINT release_chunk");
      tx.exec_script("RELEASE SAVEPOINT release_chunk");
      lock_buckets(tx, takes);
      pass(tx, nullptr);
    }
    if (dry_run) tx.rollback_only();
  });
  std::map<int64_t, HeldResult> by_id;
  for (size_t k = 0; k < done.size(); ++k) {
    Released& d = done[k];
    if (d.granted && !dry_run) {
      // a channel outside the database (webhook) delivers after the commit, as a claim's
      if (d.granted->state == GrantState::init) {
        ClaimOutcome o;
        o.grant = d.granted;
        deliver_after_commit(o);
        d.res.state = name(o.grant->state);
        if (o.grant->state == GrantState::failed)  // a definite "no" from the channel: the item says so too
          st_.transact(store::TxMode::write, [&](store::Tx& tx) {
            follow_held_item(tx, o.grant->id, ListItemState::issued, ListItemState::failed, "delivery failed",
                             opts_.actor, clock_.now_ms());
          });
      }
      if (d.ladder) announce_ladder(*d.ladder);  // after the delivery, as a claim does
    }
    if (!dry_run)
      spdlog::info("held record={} result={}{} state={}", d.res.record_code, d.res.result,
                   d.res.reason == Reason::none ? "" : std::string(" reason=") + name(d.res.reason), d.res.state);
    by_id[held[k].id] = std::move(d.res);
  }
  std::vector<HeldResult> results;
  results.reserve(by_id.size());
  for (int64_t id : ids)
    if (auto it = by_id.find(id); it != by_id.end()) results.push_back(std::move(it->second)), by_id.erase(it);
  return results;
}

}  // namespace rc::engine
