// drill's fuse check: each rule trips on an injected spike and stays quiet under its threshold
// (drill.hpp).
#include <algorithm>

#include "jobs/fuse/fuse.hpp"
#include "jobs/drill/internal.hpp"

namespace rc::jobs::drill {

using json = nlohmann::json;
using activity::Definition;
using activity::Kind;
using activity::PrizeDef;

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

}  // namespace rc::jobs::drill
