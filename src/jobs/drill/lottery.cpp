// drill's lottery check: observed frequencies against the weights (chi-square), guarantees, the
// degrade path, and the expected cost per draw (drill.hpp).
#include <algorithm>
#include <cmath>

#include "jobs/drill/internal.hpp"

namespace rc::jobs::drill {

using json = nlohmann::json;
using activity::Definition;
using activity::Kind;
using activity::PrizeDef;

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
