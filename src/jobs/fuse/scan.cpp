// fuse-scan: evaluates every enabled rule of every live or gray activity; a trip writes the event
// with its figures and blocks the prize or the activity, in one transaction.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/audit.hpp"
#include "util/hash.hpp"
#include "jobs/fuse/fuse.hpp"

namespace rc::jobs::fuse {

using nlohmann::json;

namespace {

constexpr int64_t kDayMs = 86'400'000;

struct Rule {
  int64_t id = 0, activity_id = 0;
  std::optional<int64_t> prize_id;
  std::string name, activity, prize;
  int64_t window_ms = 0, min_count = 0;
  std::optional<int64_t> max_count, max_amount, pop, dod;
  bool open = false;  // an event of this rule still blocks
  // When an operator last released an event of this rule (false alarm, unblock): the current window
  // starts no earlier, so the spike that was judged a false alarm does not trip the rule again.
  std::optional<Millis> released_at;
};

std::vector<Rule> load_rules(store::Session& s) {
  auto r = s.query(
      "SELECT r.id, r.activity_id, r.prize_id, r.name, a.code, p.code, r.window_seconds, r.min_count, r.max_count, "
      "r.max_amount_cents, r.pop_percent, r.dod_percent, "
      "CASE WHEN EXISTS (SELECT 1 FROM fuse_event e WHERE e.rule_id = r.id AND e.state = 'tripped') THEN 1 ELSE 0 END, "
      "(SELECT max(e.released_at) FROM fuse_event e WHERE e.rule_id = r.id AND e.state = 'released') "
      "FROM fuse_rule r JOIN activity a ON a.id = r.activity_id LEFT JOIN prize p ON p.id = r.prize_id "
      "WHERE r.enabled = 1 AND a.state IN ('live', 'gray') ORDER BY r.id");
  std::vector<Rule> out;
  for (auto& x : r.rows) {
    Rule u;
    u.id = x.i64(0);
    u.activity_id = x.i64(1);
    u.prize_id = x.opt_i64(2);
    u.name = x.str(3);
    u.activity = x.str(4);
    u.prize = x.str_or(5, "");
    u.window_ms = x.i64(6) * 1000;
    u.min_count = x.i64(7);
    u.max_count = x.opt_i64(8);
    u.max_amount = x.opt_i64(9);
    u.pop = x.opt_i64(10);
    u.dod = x.opt_i64(11);
    u.open = x.i64(12) != 0;
    u.released_at = x.opt_i64(13);
    out.push_back(std::move(u));
  }
  return out;
}

// The current window: the rule's window back from now, but not before its last release.
Millis window_start(const Rule& r, Millis now) { return std::max(now - r.window_ms, r.released_at.value_or(INT64_MIN)); }

// The three windows of a rule in one pass over the activity's recent grants (index on
// activity_id, created_at). Held, invalid and cancelled requests were never issued: not counted.
Windows figures(store::Session& s, const Rule& r, Millis now) {
  const Millis cur = window_start(r, now), prev = cur - r.window_ms;
  const Millis day_from = cur - kDayMs, day_to = now - kDayMs;
  auto q = s.query(
      "SELECT coalesce(sum(CASE WHEN created_at >= $3 THEN 1 ELSE 0 END), 0), "
      "coalesce(sum(CASE WHEN created_at >= $3 THEN cost_cents ELSE 0 END), 0), "
      "coalesce(sum(CASE WHEN created_at >= $4 AND created_at < $3 THEN 1 ELSE 0 END), 0), "
      "coalesce(sum(CASE WHEN created_at >= $4 AND created_at < $3 THEN cost_cents ELSE 0 END), 0), "
      "coalesce(sum(CASE WHEN created_at >= $5 AND created_at < $6 THEN 1 ELSE 0 END), 0), "
      "coalesce(sum(CASE WHEN created_at >= $5 AND created_at < $6 THEN cost_cents ELSE 0 END), 0) "
      "FROM grants WHERE activity_id = $1 AND (CAST($2 AS BIGINT) IS NULL OR prize_id = $2) "
      "AND created_at >= $7 AND created_at <= $8 AND state NOT IN ('pending', 'invalid', 'cancelled')",
      {r.activity_id, store::opt(r.prize_id), cur, prev, day_from, day_to, std::min(prev, day_from), now});
  const auto& x = q[0];
  return {{x.i64(0), x.i64(1)}, {x.i64(2), x.i64(3)}, {x.i64(4), x.i64(5)}};
}

// The first threshold the current window crosses, in the order caps, period-over-period,
// day-over-day. Ratios count grants and apply only at or above the rule's minimum volume.
std::optional<Event> evaluate(const Rule& r, const Windows& w, Millis now) {
  Event e;
  e.activity = r.activity;
  e.prize = r.prize;
  e.rule = r.name;
  e.observed = w.current;
  e.window_from = window_start(r, now);
  e.window_to = now;
  const std::string win = " in " + std::to_string(r.window_ms / 1000) + " s";
  auto ratio_trips = [&](int64_t pct, const Figures& base) {
    // current > base x (100 + pct)%, in integers; an empty base window is an infinite increase
    return w.current.count >= std::max<int64_t>(1, r.min_count) &&
           w.current.count * 100 > base.count * (100 + pct);
  };
  if (r.max_count && w.current.count > *r.max_count) {
    e.kind = "max_count";
    e.threshold = *r.max_count;
    e.reason = std::to_string(w.current.count) + " grants" + win + ", over max_count " + std::to_string(*r.max_count);
  } else if (r.max_amount && w.current.amount > *r.max_amount) {
    e.kind = "max_amount";
    e.threshold = *r.max_amount;
    e.reason = std::to_string(w.current.amount) + " cents" + win + ", over max_amount_cents " + std::to_string(*r.max_amount);
  } else if (r.pop && ratio_trips(*r.pop, w.previous)) {
    e.kind = "pop";
    e.threshold = *r.pop;
    e.compare = w.previous;
    e.reason = std::to_string(w.current.count) + " grants" + win + " against " + std::to_string(w.previous.count) +
               " in the previous window: more than +" + std::to_string(*r.pop) + "%";
  } else if (r.dod && ratio_trips(*r.dod, w.day_before)) {
    e.kind = "dod";
    e.threshold = *r.dod;
    e.compare = w.day_before;
    e.reason = std::to_string(w.current.count) + " grants" + win + " against " + std::to_string(w.day_before.count) +
               " in the same window a day earlier: more than +" + std::to_string(*r.dod) + "%";
  } else {
    return std::nullopt;
  }
  return e;
}

}  // namespace

json event_json(const Event& e) {
  json j{{"event", e.batch_no},
         {"id", e.id},
         {"activity", e.activity},
         {"prize", e.prize.empty() ? json(nullptr) : json(e.prize)},
         {"rule", e.rule},
         {"kind", e.kind},
         {"state", e.state},
         {"decision", e.decision.empty() ? json(nullptr) : json(e.decision)},
         {"observed_count", e.observed.count},
         {"observed_amount", e.observed.amount},
         {"compare_count", e.compare.count},
         {"compare_amount", e.compare.amount},
         {"threshold", e.threshold ? json(*e.threshold) : json(nullptr)},
         {"reason", e.reason},
         {"created_at", format_utc(e.created_at)}};
  if (e.window_to) {
    j["window_from"] = format_utc(e.window_from);
    j["window_to"] = format_utc(e.window_to);
  }
  if (!e.decided_by.empty()) j["decided_by"] = e.decided_by;
  if (!e.decision_reason.empty()) j["decision_reason"] = e.decision_reason;
  if (e.decided_at) j["decided_at"] = format_utc(*e.decided_at);
  return j;
}

ScanResult scan(JobRun& run, const ScanOptions& o) {
  ScanResult res;
  const Millis now = run.now();
  for (const char* k : {"rules", "tripped", "already_tripped"}) run.add(k, 0);
  auto rules = load_rules(run.store().autocommit());
  for (auto& r : rules) {
    if (!run.more()) break;
    ++res.rules;
    if (r.open) {
      ++res.already_tripped;
      run.add("rules", 1, 1);
      run.add("already_tripped");
      continue;
    }
    auto w = figures(run.store().autocommit(), r, now);
    auto ev = evaluate(r, w, now);
    if (!ev) {
      run.add("rules", 1, 1);
      continue;
    }
    ev->batch_no = new_id("F", now);
    ev->state = FuseEventState::tripped;
    ev->created_at = now;
    bool won = false;
    try {
      run.chunk([&](store::Tx& tx, Counts& c) -> int64_t {
        ++c["rules"];
        // One open event per rule: the lease keeps scans apart, and a partial unique index backs
        // this up against anything else (a dry run takes no lease, but rolls back).
        won = tx.query("SELECT 1 FROM fuse_event WHERE rule_id = $1 AND state = 'tripped'", {r.id}).empty();
        if (!won) {
          ++c["already_tripped"];
          return 1;
        }
        ev->id = tx.query(
                      "INSERT INTO fuse_event (batch_no, rule_id, activity_id, prize_id, state, observed_count, "
                      "observed_amount, reason, created_at, kind, compare_count, compare_amount, window_from, "
                      "window_to, threshold) VALUES ($1, $2, $3, $4, 'tripped', $5, $6, $7, $8, $9, $10, $11, $12, "
                      "$13, $14) RETURNING id",
                      {ev->batch_no, r.id, r.activity_id, store::opt(r.prize_id), ev->observed.count,
                       ev->observed.amount, ev->reason, now, ev->kind, ev->compare.count, ev->compare.amount,
                       ev->window_from, ev->window_to, store::opt(ev->threshold)})[0]
                     .i64(0);
        log_created(tx, ev->id, FuseEventState::tripped, run.actor(), ev->reason, now);
        ev->alert_id = queue_alert(tx, "fuse_tripped", r.activity_id, event_json(*ev), now);
        if (r.prize_id) tx.exec("UPDATE prize SET blocked = 1 WHERE id = $1", {*r.prize_id});
        ++c["tripped"];
        return 1;
      });
    } catch (const store::UniqueViolation&) {
      won = false;
      run.add("rules", 1, 1);
      run.add("already_tripped");
    }
    if (!won) {
      ++res.already_tripped;
      continue;
    }
    spdlog::error("fuse tripped: activity={} {} rule={} kind={} batch={}: {}{}", r.activity,
                  r.prize.empty() ? "scope=activity" : "prize=" + r.prize, r.name, ev->kind, ev->batch_no, ev->reason,
                  run.dry_run() ? " (dry run: nothing blocked)" : "");
    run.set_exit(Exit::findings);
    if (!run.dry_run() && ev->alert_id) deliver_alert(run.store(), *ev->alert_id, o.post, run.actor(), now, true);
    res.trips.push_back(std::move(*ev));
  }
  // After the rules, never before them: a webhook that hangs must not keep a run from protecting
  // the money. Alerts left pending by a process that died after its commit, or by a webhook that
  // was down, while the run may go on (--max-runtime, a signal, --limit).
  if (run.dry_run()) {
    res.alerts_pending = pending_alerts(run.store().autocommit(), now - kAlertGraceMs);
    if (res.alerts_pending > 0) spdlog::info("dry run: {} pending alert(s) would be posted", res.alerts_pending);
  } else if (run.more()) {
    res.alerts = deliver_pending(run.store(), o.post, run.actor(), now, now - kAlertGraceMs, kAlertsPerRun,
                                 [&] { return run.more(); });
    run.add("alerts_sent", res.alerts.sent);
    run.add("alerts_failed", res.alerts.failed);
    run.add("alerts_skipped", res.alerts.skipped);
    if (res.alerts.sent + res.alerts.failed + res.alerts.skipped > 0)
      spdlog::info("earlier alerts: {} sent, {} failed (retried by the next run), {} skipped (no [alerts] webhook)",
                   res.alerts.sent, res.alerts.failed, res.alerts.skipped);
  }
  return res;
}

}  // namespace rc::jobs::fuse
