// drill's checks, one function each (the list and what each proves: drill.hpp).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/activity/window.hpp"
#include "jobs/drill_internal.hpp"
#include "jobs/expire.hpp"
#include "jobs/fuse.hpp"
#include "jobs/reconcile.hpp"

namespace rc::jobs::drill {
namespace {

using json = nlohmann::json;
using activity::Definition;
using activity::Kind;
using activity::PrizeDef;

std::string key(const engine::ClaimOutcome& c) {
  return c.status == engine::Status::rejected ? "rejected:" + c.reason : engine::status_name(c.status);
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

engine::ClaimRequest request(const std::string& code, const std::string& user, const std::string& biz) {
  engine::ClaimRequest r;
  r.activity = code;
  r.user = user;
  r.biz_id = biz;
  r.deliver = false;
  return r;
}

Check result(bool pass, std::string detail, json figures = json::object()) {
  Check c;
  c.result = pass ? "pass" : "fail";
  c.detail = std::move(detail);
  c.figures = std::move(figures);
  return c;
}

Check not_applicable(std::string why) {
  Check c;
  c.result = "n/a";
  c.detail = std::move(why);
  return c;
}

// Grants and remaining stock per prize of one drill copy.
struct PrizeBook {
  int64_t granted = 0, remain = 0, total = 0, degraded = 0;
};
std::map<std::string, PrizeBook> books(Drill& x, const std::string& code) {
  std::map<std::string, PrizeBook> out;
  for (auto& r : x.sc.st
                     ->query("SELECT p.code, (SELECT coalesce(sum(s.remain), 0) FROM stock s WHERE s.prize_id = p.id), "
                             "(SELECT coalesce(sum(s.total), 0) FROM stock s WHERE s.prize_id = p.id), "
                             "(SELECT count(*) FROM grants g WHERE g.prize_id = p.id), "
                             "(SELECT count(*) FROM grants g WHERE g.prize_id = p.id AND g.degraded_from IS NOT NULL) "
                             "FROM prize p JOIN activity a ON a.id = p.activity_id WHERE a.code = $1 ORDER BY p.id",
                             {code})
                     .rows) {
    auto& b = out[r.str(0)];
    b.remain = r.i64(1);
    b.total = r.i64(2);
    b.granted = r.i64(3);
    b.degraded = r.i64(4);
  }
  return out;
}

// The prizes a claim can end on: direct and redpack claims name them, a lottery draws those with a
// weight and degrades to its consolation prize.
bool reachable(const Definition& d, const PrizeDef& p) {
  if (d.kind != Kind::lottery) return true;
  return p.weight > 0 || (d.consolation && *d.consolation == p.code);
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
    const bool reset = before.status == engine::Status::rejected && before.reason == "limit_reached" &&
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

Check check_lottery(Drill& x) {
  const Definition& def = x.def;
  if (def.kind != Kind::lottery) return not_applicable("not a lottery");
  json fig = json::object();
  std::string detail;
  bool pass = true;
  // 1. frequencies against the weights, stock lifted
  int64_t wsum = 0;
  for (auto& p : def.prizes) wsum += p.weight;
  if (wsum > 0) {
    Definition d = x.copy("lottery");
    const int64_t n = x.o.lottery_draws;
    lift_stock(d, n + 10);
    lift_budget(d);
    drop_limits(d);
    const std::string code = x.create(d, false);  // one draw per user: guarantees would skew the counts
    auto outs = x.issue(code, n, "l");
    auto b = books(x, code);
    double chi = 0;
    int cells = 0;
    bool zero_drawn = false;
    json freq = json::object();
    // prizes expected fewer than 5 times are pooled into one cell (the test's usual validity rule)
    double pooled_o = 0, pooled_e = 0;
    auto cell = [&](double o, double e) {
      chi += (o - e) * (o - e) / e;
      ++cells;
    };
    for (auto& p : def.prizes) {
      const int64_t o = b[p.code].granted;
      const double e = double(n) * double(p.weight) / double(wsum);
      freq[p.code] = {{"weight", p.weight}, {"observed", o}, {"expected", std::round(e * 10) / 10}};
      if (p.weight == 0) {
        zero_drawn |= o > 0;
        continue;
      }
      if (e < 5) {
        pooled_o += double(o);
        pooled_e += e;
        continue;
      }
      cell(double(o), e);
    }
    if (pooled_e > 0) cell(pooled_o, pooled_e);
    const double pv = cells > 1 ? chi_square_p(chi, cells - 1) : 1.0;
    fig["draws"] = n;
    fig["frequencies"] = freq;
    fig["chi_square"] = chi;
    fig["p_value"] = pv;
    fig["draw_outcomes"] = outs;
    const bool ok = pv > 0.001 && !zero_drawn && outs["granted"] == n;
    pass = pass && ok;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%lld draws: chi-square %.2f over %d cells, p = %.4f%s", (long long)n, chi, cells, pv,
                  zero_drawn ? ", a prize of weight 0 was drawn" : "");
    detail += buf;
  } else {
    detail += "no weights";
  }
  // 2. guarantees: one user draws up to the guaranteed draw
  if (!def.guarantees.empty()) {
    Definition d = x.copy("lottery_g");
    int64_t most = 0;
    for (auto& g : def.guarantees) most = std::max(most, g.nth);
    lift_stock(d, most * int64_t(def.guarantees.size()) + 10);
    lift_budget(d);
    drop_limits(d);
    const std::string code = x.create(d);
    engine::Engine e(*x.sc.st, x.clock, x.engine_options());
    json gs = json::array();
    for (size_t gi = 0; gi < def.guarantees.size(); ++gi) {
      const auto& g = def.guarantees[gi];
      if (g.nth > 1000) {
        gs.push_back({{"nth", g.nth}, {"prize", g.prize}, {"result", "n/a: more than 1,000 draws"}});
        continue;
      }
      const std::string user = "g" + std::to_string(gi);
      std::string got;
      for (int64_t i = 1; i <= g.nth; ++i) {
        auto c = e.claim(request(code, user, code + ":" + user + ":" + std::to_string(i)));
        if (i == g.nth && c.grant) got = c.grant->prize;
      }
      const bool hit = got == g.prize;
      pass = pass && hit;
      gs.push_back({{"nth", g.nth}, {"prize", g.prize}, {"drawn", got}, {"result", hit ? "pass" : "fail"}});
      detail += "; guarantee " + std::to_string(g.nth) + " -> " + g.prize + (hit ? " hit" : " MISSED (drew " + got + ")");
    }
    fig["guarantees"] = gs;
  }
  // 3. the degrade path: every other prize sold out, draws fall to the consolation prize
  {
    Definition d = x.copy("lottery_degrade");
    lift_budget(d);
    drop_limits(d);
    std::string target;  // the prize that stays in stock
    if (def.consolation) {
      target = *def.consolation;
    } else {
      // no consolation: the heaviest prize is sold out, and must never be granted
      const PrizeDef* heavy = &def.prizes[0];
      for (auto& p : def.prizes) if (p.weight > heavy->weight) heavy = &p;
      target = "";
      for (auto& p : d.prizes) p.stock = p.code == heavy->code ? 0 : 100;
      const std::string code = x.create(d);
      auto outs = x.issue(code, 50, "dg");
      auto b = books(x, code);
      const bool ok = b[heavy->code].granted == 0;
      pass = pass && ok;
      fig["degrade"] = {{"sold_out_prize", heavy->code}, {"draws", 50}, {"outcomes", outs}};
      detail += "; with " + heavy->code + " sold out and no consolation prize, " +
                std::to_string(b[heavy->code].granted) + " of it granted in 50 draws";
    }
    if (!target.empty()) {
      for (auto& p : d.prizes) p.stock = p.code == target ? 100 : 0;
      const std::string code = x.create(d);
      auto outs = x.issue(code, 50, "dg");
      auto b = books(x, code);
      int64_t elsewhere = 0;
      for (auto& [c, pb] : b)
        if (c != target) elsewhere += pb.granted;
      const bool ok = elsewhere == 0 && b[target].granted == 50;
      pass = pass && ok;
      fig["degrade"] = {{"consolation", target}, {"draws", 50}, {"degraded", b[target].degraded}, {"outcomes", outs}};
      detail += "; every other prize sold out: " + std::to_string(b[target].granted) + " of 50 draws granted " + target +
                " (" + std::to_string(b[target].degraded) + " degraded), " + std::to_string(elsewhere) + " of a sold-out prize";
    }
  }
  // 4. what a draw costs
  // (the same integer figures as lint's expected_cost: money stays int64 cents)
  if (auto c = activity::expected_draw_cost(def)) {
    fig["expected_cost_per_draw_cents"] = c->per_draw_cents;
    detail += "; expected cost per draw " + std::to_string(c->per_draw_cents) + " cents";
    if (c->draws_covered) {
      fig["draws_budget_covers"] = *c->draws_covered;
      detail += ", the budget covers " + std::to_string(*c->draws_covered) + " draws";
    }
  }
  return result(pass, detail, fig);
}

Check check_fuse(Drill& x) {
  const Definition& def = x.def;
  if (def.fuses.empty()) return not_applicable("no fuse rule");
  bool pass = true;
  std::string detail;
  json rules = json::array();
  for (size_t i = 0; i < def.fuses.size(); ++i) {
    const auto& rule = def.fuses[i];
    // the prize the spike is made of: the rule's, or (activity-wide) the first a claim can get
    const PrizeDef* p = nullptr;
    for (auto& q : def.prizes)
      if (rule.prize ? q.code == *rule.prize : reachable(def, q)) {
        p = &q;
        break;
      }
    json rj{{"rule", rule.name}};
    auto fail = [&](const std::string& why) {
      pass = false;
      rj["result"] = "fail";
      rj["detail"] = why;
      detail += (detail.empty() ? "" : "; ") + rule.name + ": " + why;
      rules.push_back(rj);
    };
    if (!p) {
      fail("no prize a claim can get");
      continue;
    }
    const auto* item = def.item(p->item);
    const int64_t unit = item ? item->unit_cost_cents : 0;
    const int64_t cost_max = def.max_cost_cents(*p), cost_min = p->amount * unit;
    // quiet traffic: at the minimum volume, and under every cap
    int64_t q = std::max<int64_t>(1, rule.min_count);
    if (rule.max_count) q = std::min(q, *rule.max_count);
    if (rule.max_amount_cents && cost_max > 0) q = std::min(q, *rule.max_amount_cents / cost_max);
    const int64_t base = q;  // the comparison windows (previous, a day earlier) hold as much
    // the smallest spike that must trip it after the quiet traffic (s), and the smallest that can
    // trip it at all (s_min: the comparison windows empty), which the real stock must allow
    std::optional<int64_t> s, s_min;
    auto least = [](std::optional<int64_t>& to, int64_t v) { to = to ? std::min(*to, v) : v; };
    for (auto* to : {&s, &s_min}) {
      if (rule.max_count) least(*to, *rule.max_count + 1);
      if (rule.max_amount_cents && cost_min > 0) least(*to, *rule.max_amount_cents / cost_min + 1);
    }
    for (auto pct : {rule.pop_percent, rule.dod_percent})
      if (pct) {
        least(s, std::max<int64_t>({base * (100 + *pct) / 100 + 1, rule.min_count, 1}));
        least(s_min, std::max<int64_t>(rule.min_count, 1));
      }
    if (!s) {
      fail("can never trip: its only cap is on the amount and " + p->code + " costs nothing");
      continue;
    }
    int64_t stock = 0;
    for (auto& q2 : def.prizes)
      if (rule.prize ? q2.code == *rule.prize : reachable(def, q2)) stock += q2.stock;
    rj["spike"] = *s;
    rj["quiet"] = q;
    if (*s_min > stock) {
      fail("can never trip with this stock: it needs " + std::to_string(*s_min) + " grants within " +
           std::to_string(rule.window_seconds) + " s, the stock is " + std::to_string(stock));
      continue;
    }
    if (*s > 100'000) {
      fail("needs " + std::to_string(*s) + " grants to trip, more than a drill issues (100,000)");
      continue;
    }
    const Millis w = rule.window_seconds * 1000;
    const Millis at = x.t0 + 3 * w + 2 * kDay;  // the scan's time: room for the comparison windows before it
    Definition d = x.copy("fuse" + std::to_string(i));
    d.start_at = at - 3 * w - 3 * kDay;
    d.end_at = at + kDay;
    d.fuses = {rule};
    lift_stock(d, *s + 2 * base + 10);
    lift_budget(d);
    drop_limits(d);
    if (d.kind == Kind::lottery)  // every draw is the spike's prize
      for (auto& q2 : d.prizes) q2.weight = q2.code == p->code ? 1 : 0;
    x.clock.set(x.t0);
    const std::string code = x.create(d, false);  // the spike's users draw once each: no guarantee applies
    const std::optional<std::string> pick = d.kind == Kind::direct ? std::optional<std::string>(p->code) : std::nullopt;
    if (rule.pop_percent) {
      x.clock.set(at - w - w / 2);
      x.issue(code, base, "fp", pick);
    }
    if (rule.dod_percent) {
      x.clock.set(at - kDay - w / 2);
      x.issue(code, base, "fd", pick);
    }
    x.clock.set(at - w / 2);
    x.issue(code, q, "fq", pick);
    auto trips = [&] {
      x.clock.set(at);
      x.run_job("fuse-scan", [](JobRun& run) { fuse::scan(run, {}); });
      return x.count("SELECT count(*) FROM fuse_event e JOIN activity a ON a.id = e.activity_id WHERE a.code = $1",
                     {code});
    };
    const int64_t quiet = trips();
    x.clock.set(at - w / 2);
    x.issue(code, *s - q, "fs", pick);
    const int64_t tripped = trips();
    std::string kind;
    auto k = x.sc.st->query("SELECT coalesce(max(e.kind), '') FROM fuse_event e JOIN activity a ON a.id = e.activity_id "
                            "WHERE a.code = $1",
                            {code});
    kind = k[0].str(0);
    const bool ok = quiet == 0 && tripped == 1;
    rj["quiet_trips"] = quiet;
    rj["tripped"] = tripped == 1;
    rj["kind"] = kind;
    rj["result"] = ok ? "pass" : "fail";
    pass = pass && ok;
    detail += (detail.empty() ? "" : "; ") + rule.name + ": quiet at " + std::to_string(q) + " grant(s) in the window" +
              (quiet ? " BUT TRIPPED" : "") + ", " + (tripped == 1 ? "tripped (" + kind + ")" : "did NOT trip") +
              " at " + std::to_string(*s);
    rules.push_back(rj);
  }
  return result(pass, detail, {{"rules", rules}});
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
  const bool pass = st == "ended" && ended_rows == 1 && settled == 1 && again == 0;
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
  auto diffs = reconcile::find_diffs(*x.sc.st, ro, x.clock.now_ms());
  std::string detail = diffs.empty() ? "clean over the scratch database" : std::to_string(diffs.size()) + " difference(s):";
  json ds = json::array();
  for (size_t i = 0; i < diffs.size(); ++i) {
    if (i < 3) detail += " " + diffs[i].check + " " + diffs[i].key + " expected " + diffs[i].expected + " got " + diffs[i].actual;
    ds.push_back({{"check", diffs[i].check}, {"key", diffs[i].key}, {"expected", diffs[i].expected}, {"actual", diffs[i].actual}});
  }
  return result(diffs.empty(), detail, {{"diffs", ds}});
}

// Q(k/2, x/2): the regularized upper incomplete gamma function, by its series below a + 1 and its
// continued fraction above (both converge fast there).
double chi_square_p(double x, int k) {
  if (x <= 0) return 1.0;
  const double a = k / 2.0, z = x / 2.0;
  const double lg = std::lgamma(a);
  if (z < a + 1) {
    double sum = 1.0 / a, term = sum;
    for (int n = 1; n < 1000; ++n) {
      term *= z / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
    }
    return std::max(0.0, 1.0 - sum * std::exp(-z + a * std::log(z) - lg));
  }
  double b = z + 1 - a, c = 1e300, dd = 1 / b, h = dd;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    dd = an * dd + b;
    if (std::fabs(dd) < 1e-300) dd = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    dd = 1 / dd;
    const double del = dd * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15) break;
  }
  return std::exp(-z + a * std::log(z) - lg) * h;
}

}  // namespace rc::jobs::drill
