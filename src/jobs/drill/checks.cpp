// drill's checks, one function each (the list and what each proves: drill.hpp).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/activity/window.hpp"
#include "core/states.hpp"
#include "jobs/drill/internal.hpp"
#include "jobs/expire/expire.hpp"
#include "jobs/fuse/fuse.hpp"
#include "jobs/reconcile/reconcile.hpp"

namespace rc::jobs::drill {
namespace {

using json = nlohmann::json;
using activity::Definition;
using activity::Kind;
using activity::PrizeDef;

std::string key(const engine::ClaimOutcome& c) {
  return c.status == engine::Status::rejected ? std::string("rejected:") + name(c.reason) : engine::status_name(c.status);
}

// The figures every concurrent check shows of its workers: how many, how many distinct processes.
json worker_figures(const WorkersRun& r) {
  return {{"workers", int64_t(r.workers.size())}, {"worker_pids", r.distinct_pids()}};
}

json merged(json a, const json& b) {
  a.update(b);
  return a;
}

int64_t get(const std::map<std::string, int64_t>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

// The start of the next limit period after t in the zone, by the engine's own period keys (a
// search: whole hours forward, then to the millisecond).
Millis next_period(Period p, Millis t, const std::string& zone) {
  const std::string k0 = period_key(p, t, zone);
  Millis lo = t, hi = t;
  for (int i = 0; i < 24 * 40; ++i) {
    hi = lo + 3'600'000;
    if (period_key(p, hi, zone) != k0) break;
    lo = hi;
  }
  while (hi - lo > 1) {
    Millis mid = lo + (hi - lo) / 2;
    (period_key(p, mid, zone) == k0 ? lo : hi) = mid;
  }
  return hi;
}

}  // namespace

Check check_oversell(Drill& x) {
  constexpr int64_t kN = 10;  // the small stock each prize is clamped to
  Definition d = x.copy("oversell");
  for (auto& p : d.prizes) {
    p.stock = std::min<int64_t>(p.stock, kN);
    p.stock_buckets = std::min<int64_t>(p.stock_buckets, std::max<int64_t>(1, p.stock));
  }
  lift_budget(d);
  drop_limits(d);  // distinct users anyway: a limit must not hide an oversell
  const std::string code = x.create(d);
  const int k = x.o.workers;
  const size_t np = d.prizes.size();
  // direct claims name their prize in turn; a lottery draws (more draws: its odds decide)
  const int64_t attempts = d.kind == Kind::lottery ? 30 * kN * int64_t(np) + 4 * k : 2 * kN * int64_t(np) + 4 * k;
  const int64_t per = (attempts + k - 1) / k;
  WorkerTask task;
  task.check = "oversell";
  task.code = code;
  task.claims = per;
  task.user = "o{w}-{i}";
  task.biz = code + ":{w}:{i}";
  if (d.kind == Kind::direct)
    for (auto& p : d.prizes) task.prizes.push_back(p.code);
  const WorkersRun run = x.processes(k, task);
  const auto t = run.outcomes();
  auto b = books(x, code);
  bool pass = true, any_out = false;
  std::string detail;
  json per_prize = json::object();
  for (auto& p : d.prizes) {
    const auto& pb = b[p.code];
    per_prize[p.code] = {{"stock", p.stock}, {"granted", pb.granted}, {"remain", pb.remain}};
    const bool conserved = pb.granted + pb.remain == p.stock && pb.remain >= 0 && pb.granted <= p.stock;
    if (!conserved) {
      pass = false;
      detail += p.code + ": stock " + std::to_string(p.stock) + " but " + std::to_string(pb.granted) + " granted and " +
                std::to_string(pb.remain) + " left; ";
    }
    if (pb.remain == 0) any_out = true;
    // direct and redpack: every prize a claim names runs out exactly
    if (d.kind == Kind::direct && pb.remain != 0) {
      pass = false;
      detail += p.code + ": " + std::to_string(pb.remain) + " left after " + std::to_string(attempts) + " claims; ";
    }
  }
  if (d.kind == Kind::redpack && b[d.prizes[0].code].remain != 0) {
    pass = false;
    detail += d.prizes[0].code + " did not run out; ";
  }
  if (d.kind == Kind::lottery && !any_out) {
    pass = false;
    detail += "no prize ran out after " + std::to_string(attempts) + " draws; ";
  }
  if (detail.empty())
    detail = std::to_string(get(t, "granted")) + " granted of stock clamped to " + std::to_string(kN) +
             " per prize by " + std::to_string(k) + " worker processes (" + std::to_string(per * k) +
             " claims); no prize below 0";
  return result(pass, detail,
                merged(worker_figures(run), {{"claims", per * k}, {"outcomes", t}, {"prizes", per_prize}}));
}

Check check_idempotency(Drill& x) {
  Definition d = x.copy("idempotency");
  lift_stock(d, 100);
  lift_budget(d);
  drop_limits(d);
  const std::string code = x.create(d);
  const int k = x.o.workers;
  const std::string biz = code + ":once";
  WorkerTask task;
  task.check = "idempotency";
  task.code = code;
  task.claims = 1;
  task.user = "idem-user";
  task.biz = biz;
  const WorkersRun run = x.processes(k, task);
  const auto t = run.outcomes();
  const int64_t rows = x.count("SELECT count(*) FROM grants WHERE biz_id = $1", {biz});
  const bool pass = rows == 1 && get(t, "granted") == 1 && get(t, "replayed") == k - 1;
  return result(pass,
                "the same biz_id from " + std::to_string(k) + " worker processes at once: " + std::to_string(rows) +
                    " grant(s), " + std::to_string(get(t, "granted")) + " granted, " +
                    std::to_string(get(t, "replayed")) + " replayed",
                merged(worker_figures(run), {{"grants", rows}, {"outcomes", t}}));
}

Check check_limits(Drill& x) {
  const Definition& def = x.def;
  std::optional<activity::LimitSpec> lim = def.limit;
  if (def.kind != Kind::lottery && def.prizes[0].limit && (!lim || def.prizes[0].limit->count < lim->count))
    lim = def.prizes[0].limit;
  if (!lim) return not_applicable("no per-user limit");
  if (lim->count > 10'000) return not_applicable("a limit of " + std::to_string(lim->count) + " is more than a drill claims");
  const int k = x.o.workers;
  const int64_t attempts = lim->count + k, per = (attempts + k - 1) / k;
  Definition d = x.copy("limits");
  lift_stock(d, attempts + 10);
  lift_budget(d);
  const std::string code = x.create(d);
  WorkerTask task;
  task.check = "limits";
  task.code = code;
  task.claims = per;
  task.user = "limit-user";
  task.biz = code + ":{w}:{i}";
  const WorkersRun run = x.processes(k, task);
  const int64_t got = x.count("SELECT count(*) FROM grants g JOIN activity a ON a.id = g.activity_id WHERE a.code = $1 "
                              "AND g.user_id = 'limit-user'",
                              {code});
  bool pass = got == lim->count;
  std::string detail = std::to_string(per * k) + " claims of one user from " + std::to_string(k) + " worker processes: " +
                       std::to_string(got) + " granted, limit " + std::to_string(lim->count) + " per " +
                       period_name(lim->period);
  json fig = merged(worker_figures(run), {{"claims", per * k}, {"granted", got}, {"limit", lim->count},
                                         {"period", period_name(lim->period)}, {"outcomes", run.outcomes()}});
  if (lim->period != Period::total) {
    // the period ends at midnight in the activity's zone: refused 1 ms before, granted at it
    const Millis edge = next_period(lim->period, x.clock.now_ms(), def.timezone);
    const std::string local = format_in_zone(edge, def.timezone);
    const bool midnight = local.find("T00:00:00") != std::string::npos;
    engine::Engine e(*x.sc.st, x.clock, x.engine_options());
    x.clock.set(edge - 1);
    auto before = e.claim(request(code, "limit-user", code + ":edge-1"));
    x.clock.set(edge);
    auto after = e.claim(request(code, "limit-user", code + ":edge"));
    const bool reset = before.status == engine::Status::rejected && before.reason == engine::Reason::limit_reached &&
                       after.status == engine::Status::granted;
    fig["next_period"] = local;
    fig["before_edge"] = key(before);
    fig["at_edge"] = key(after);
    detail += "; the next " + std::string(period_name(lim->period)) + " starts " + local + " (" + format_utc(edge) +
              "): " + key(before) + " 1 ms before, " + key(after) + " at it";
    if (!midnight) detail += "; that is not midnight in " + def.timezone;
    pass = pass && reset && midnight;
  }
  return result(pass, detail, fig);
}

Check check_budget(Drill& x) {
  const Definition& def = x.def;
  if (!def.budget_cents) return not_applicable("no budget");
  int64_t c = 0;
  if (def.kind == Kind::direct) c = def.max_cost_cents(def.prizes[0]);
  else
    for (auto& p : def.prizes)
      if (reachable(def, p)) c = std::max(c, def.max_cost_cents(p));
  if (c == 0) return not_applicable("the prizes cost nothing");
  Definition d = x.copy("budget");
  lift_stock(d, 100);
  drop_limits(d);
  d.budget_cents = c;
  const std::string code = x.create(d);
  WorkerTask task;
  task.check = "budget";
  task.code = code;
  task.claims = 1;
  task.user = "budget-u{w}";
  task.biz = code + ":{w}";
  const WorkersRun run = x.processes(2, task);
  const auto t = run.outcomes();
  const int64_t consumed = x.count("SELECT b.consumed_cents FROM budget b JOIN activity a ON a.id = b.activity_id "
                                   "WHERE a.code = $1",
                                   {code});
  const int64_t cost = x.count("SELECT coalesce(sum(g.cost_cents), 0) FROM grants g JOIN activity a ON a.id = "
                               "g.activity_id WHERE a.code = $1",
                               {code});
  const int64_t granted = get(t, "granted");
  bool pass = consumed <= c && consumed == cost && granted >= 1;
  const bool fixed = def.kind == Kind::direct && !def.prizes[0].amount_max;
  if (fixed) pass = pass && granted == 1 && get(t, "rejected:budget_exhausted") == 1;
  return result(pass,
                "a budget of one grant (" + std::to_string(c) + " cents) and 2 concurrent claims (2 processes): " +
                    std::to_string(granted) + " granted, " + std::to_string(consumed) + " cents consumed",
                merged(worker_figures(run), {{"budget_cents", c}, {"consumed_cents", consumed}, {"outcomes", t}}));
}

Check check_expiry(Drill& x) {
  Definition d = x.copy("expiry");
  d.end_at = x.t0 + kDay;
  lift_stock(d, 100);
  lift_budget(d);
  drop_limits(d);
  const std::string code = x.create(d);
  auto outs = x.issue(code, 3, "e");
  x.clock.set(activity::window_close(d.end_at) + 1000);
  auto expire_once = [&] { return x.run_job("expire", [](JobRun& run) { expire(run, {}); }); };
  expire_once();
  auto second = expire_once();
  const auto st = x.sc.st->query("SELECT state FROM activity WHERE code = $1", {code})[0].str(0);
  const int64_t ended_rows = x.count("SELECT count(*) FROM status_log l JOIN activity a ON a.id = l.entity_id "
                                     "WHERE l.entity = 'activity' AND a.code = $1 AND l.to_state = 'ended'",
                                     {code});
  const int64_t settled = x.count("SELECT count(*) FROM audit WHERE action = 'activity.settle' AND entity_key = $1", {code});
  const int64_t again = second.count("activities_ended") ? second.at("activities_ended") : 0;
  const bool pass =
      parse_state<ActivityState>(st) == ActivityState::ended && ended_rows == 1 && settled == 1 && again == 0;
  return result(pass,
                "after the window: " + st + " (" + std::to_string(ended_rows) + " log row, " + std::to_string(settled) +
                    " settlement); a second expire ended " + std::to_string(again),
                {{"state", st}, {"ended_log_rows", ended_rows}, {"settlements", settled}, {"second_run_ended", again},
                 {"claims", outs}});
}

Check check_peak(Drill& x) {
  if (!x.o.peak_qps) return not_applicable("no --peak-qps given");
  Definition d = x.copy("peak");
  lift_stock(d, 10'000'000);
  lift_budget(d);
  drop_limits(d);
  const std::string code = x.create(d);
  const int k = x.o.workers;
  WorkerTask task;
  task.check = "peak";
  task.code = code;
  task.seconds = x.o.peak_seconds;
  task.user = "pk{w}-{i}";
  task.biz = code + ":{w}:{i}";
  // the time runs from the release at the barrier (starting and connecting the workers is not
  // part of the peak) to the last worker's result
  const WorkersRun run = x.processes(k, task);
  auto t = run.outcomes();
  const int64_t granted = get(t, "granted");
  t.erase("granted");
  const double secs = run.seconds;
  const double qps = double(granted) / std::max(1e-9, secs);
  const double need = 2 * *x.o.peak_qps;
  char buf[260];
  std::snprintf(buf, sizeof buf,
                "%.0f claims/s at %d workers (%lld in %.1f s), claims without delivery; needed %.0f (2 x --peak-qps "
                "%.0f)",
                qps, k, (long long)granted, secs, need, *x.o.peak_qps);
  return result(qps >= need, buf,
                merged(worker_figures(run), {{"claims_per_s", std::round(qps)}, {"needed_per_s", need}, {"delivery", false},
                                             {"granted", granted}, {"seconds", secs}, {"other_outcomes", t}}));
}

Check check_reconcile(Drill& x) {
  reconcile::Options ro;
  for (auto& c : reconcile::checks())
    if (std::string(c.name) != "stuck") ro.checks.push_back(c.name);  // a drill's claims stay undelivered on purpose
  ro.ledger_channels = x.o.ledger_channels;
  ro.outbox_channels = x.o.outbox_channels;
  auto diffs = reconcile::find_diffs(*x.sc.st, ro, x.clock.now_ms());
  std::string detail = diffs.empty() ? "clean over the scratch database" : std::to_string(diffs.size()) + " difference(s):";
  json ds = json::array();
  for (size_t i = 0; i < diffs.size(); ++i) {
    if (i < 3) detail += " " + diffs[i].check + " " + diffs[i].key + " expected " + diffs[i].expected + " got " + diffs[i].actual;
    ds.push_back({{"check", diffs[i].check}, {"key", diffs[i].key}, {"expected", diffs[i].expected}, {"actual", diffs[i].actual}});
  }
  return result(diffs.empty(), detail, {{"diffs", ds}});
}

}  // namespace rc::jobs::drill
