// lint(): the automated technical review (技术审核) of a parsed definition. The product reviewer
// reads the copy and the game; this reads the numbers — amounts, weights, stock, budget — because
// that is where a one-person slip turns into real money (an extra zero, a lottery with no
// consolation prize, a cash activity with no budget). Every finding names its field and what to do.
//
// Codes (stable, for scripts):
//   error    unknown_item, duplicate_code, unknown_channel, cash_without_budget, no_prizes,
//            bad_weight, weights_zero, no_consolation, kind_mismatch, guarantee_unknown_prize,
//            guarantee_bad_nth, amount_over_item_max, redpack_range, redpack_shape,
//            fuse_unknown_prize, fuse_no_threshold, buckets_over_stock, buckets_over_max,
//            value_too_large, ladder_order, ladder_without_budget, high_value_consolation
//   warning  stock_over_budget, amount_outlier, amount_vs_unit_cost, cash_unit_cost,
//            limit_above_stock, zero_stock, weight_ignored, unused_item,
//            guarantee_unreachable, gray_overlaps_blacklist, window_too_long, high_value_unused,
//            degrade_without_high_value
//   info     expected_cost
#include <algorithm>
#include <cstdio>
#include <map>

#include "core/activity/definition.hpp"
#include "util/checked_math.hpp"
#include "util/text_distance.hpp"

namespace rc::activity {

namespace {

using util::did_you_mean;
using util::sat_add;
using util::sat_mul;

// 12345 -> "123.45 yuan (12345 cents)"
std::string money(int64_t cents) {
  char buf[96];
  unsigned long long a = cents < 0 ? 0ULL - static_cast<unsigned long long>(cents) : static_cast<unsigned long long>(cents);
  std::snprintf(buf, sizeof buf, "%s%llu.%02llu yuan (%lld cents)", cents < 0 ? "-" : "", a / 100, a % 100,
                static_cast<long long>(cents));
  return buf;
}

std::string q(const std::string& s) { return "'" + s + "'"; }

// A non-negative 128-bit value in decimal (std::to_string has no overload for it).
std::string big(__int128 v) {
  if (v <= 0) return "0";
  std::string out;
  for (; v > 0; v /= 10) out.insert(out.begin(), char('0' + int(v % 10)));
  return out;
}

std::string list(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string suggest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string g = did_you_mean(word, candidates);
  return g.empty() ? "" : " (did you mean " + q(g) + "?)";
}

class Linter {
 public:
  Linter(const Definition& d, const LintContext& ctx) : d_(d), ctx_(ctx) {
    for (auto& p : d.prizes) prize_codes_.push_back(p.code);
    for (auto& i : d.items) item_codes_.push_back(i.code);
  }

  std::vector<Finding> run() {
    if (d_.prizes.empty())
      add("no_prizes", Severity::error, "prizes", "the activity has no prizes: add at least one [[prizes]] table");
    duplicates();
    items();
    budget_required();
    for (size_t i = 0; i < d_.prizes.size(); ++i) prize(d_.prizes[i]);
    if (d_.kind == Kind::lottery) lottery();
    else if (d_.consolation || !d_.guarantees.empty())
      add("kind_mismatch", Severity::error, "lottery",
          "[lottery] applies only to kind = \"lottery\": remove it, or change the kind");
    if (d_.kind == Kind::redpack) redpack();
    limits();
    activity_limit();
    stock_vs_budget();
    outliers();
    fuses();
    lists();
    ladder();
    if (d_.end_at - d_.start_at > Millis(366) * 86400000)
      add("window_too_long", Severity::warning, "end",
          "the window is longer than a year (" + std::to_string((d_.end_at - d_.start_at) / 86400000) +
              " days): check the end date and its year");
    return std::move(out_);
  }

 private:
  const Definition& d_;
  const LintContext& ctx_;
  std::vector<std::string> prize_codes_, item_codes_;
  std::vector<Finding> out_;

  void add(const std::string& code, Severity s, const std::string& path, const std::string& msg) {
    Finding f;
    f.code = code;
    f.severity = s;
    f.path = path;
    f.message = msg;
    out_.push_back(std::move(f));
  }

  std::string amount_path(const PrizeDef& p) const { return p.path + (p.amount_max ? ".amount_max" : ".amount"); }

  void duplicates() {
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < d_.prizes.size(); ++i) {
      auto [it, fresh] = seen.emplace(d_.prizes[i].code, i);
      if (!fresh)
        add("duplicate_code", Severity::error, d_.prizes[i].path + ".code",
            "prize code " + q(d_.prizes[i].code) + " is already used by prizes[" + std::to_string(it->second) +
                "]: give each prize its own code");
    }
    std::map<std::string, size_t> fuse_names;
    for (size_t i = 0; i < d_.fuses.size(); ++i) {
      auto [it, fresh] = fuse_names.emplace(d_.fuses[i].name, i);
      if (!fresh)
        add("duplicate_code", Severity::error, d_.fuses[i].path + ".name",
            "fuse name " + q(d_.fuses[i].name) + " is already used by fuse[" + std::to_string(it->second) +
                "]: give each rule its own name");
    }
  }

  void items() {
    std::set<std::string> channels = ctx_.channels;
    channels.insert("ledger");
    channels.insert("outbox");
    std::vector<std::string> chan_list(channels.begin(), channels.end());
    for (auto& it : d_.items) {
      if (!channels.count(it.channel))
        add("unknown_channel", Severity::error, it.path + ".channel",
            "item " + q(it.code) + " is delivered through channel " + q(it.channel) +
                ", which is not configured" + suggest(it.channel, chan_list) + ": use one of " + list(chan_list) +
                ", or add [channels." + it.channel + "] to the config");
      if (it.kind == "cash" && it.unit_cost_cents != 1)
        add("cash_unit_cost", Severity::warning, it.path + ".unit_cost_cents",
            "cash item " + q(it.code) + " has unit_cost_cents = " + std::to_string(it.unit_cost_cents) +
                ": cash items normally use 1, so that amounts are cents; check every amount of its prizes");
      bool used = std::any_of(d_.prizes.begin(), d_.prizes.end(), [&](const PrizeDef& p) { return p.item == it.code; });
      if (!used)
        add("unused_item", Severity::warning, it.path,
            "item " + q(it.code) + " is not used by any prize: remove it, or check the prizes' item names");
    }
  }

  void budget_required() {
    if (d_.budget_cents) return;
    const ItemDef* cash = nullptr;
    for (auto& it : d_.items)
      if (it.kind == "cash") {
        cash = &it;
        break;
      }
    if (cash)
      add("cash_without_budget", Severity::error, "budget_cents",
          "cash item " + q(cash->code) + " pays out money but the activity has no budget_cents: "
          "set budget_cents to the most it may pay out, in cents");
    else if (d_.kind == Kind::redpack)
      add("cash_without_budget", Severity::error, "budget_cents",
          "a redpack activity needs budget_cents (the pot its packets are paid from), in cents");
  }

  void prize(const PrizeDef& p) {
    const ItemDef* it = d_.item(p.item);
    if (!it)
      add("unknown_item", Severity::error, p.path + ".item",
          "prize " + q(p.code) + " delivers item " + q(p.item) + ", which is not defined" + suggest(p.item, item_codes_) +
              ": add [items." + p.item + "] or use one of: " + list(item_codes_));
    int64_t top = std::max(p.amount, p.amount_max.value_or(p.amount));
    if (it && it->max_amount && top > *it->max_amount)
      add("amount_over_item_max", Severity::error, amount_path(p),
          "prize " + q(p.code) + " grants " + std::to_string(top) + " units of item " + q(it->code) +
              ", over the item's max_amount " + std::to_string(*it->max_amount) +
              ": check for an extra zero, or raise the item's max_amount");
    if (it && it->kind != "cash" && it->kind != "points" && it->unit_cost_cents > 1 && p.amount >= it->unit_cost_cents)
      add("amount_vs_unit_cost", Severity::warning, p.path + ".amount",
          "prize " + q(p.code) + " grants " + std::to_string(p.amount) + " units of " + q(it->code) + ", each worth " +
              money(it->unit_cost_cents) + ": amount counts items, not cents; for one item write amount = 1");
    if (d_.kind == Kind::redpack && !p.amount_max && p.amount == 0)
      add("redpack_range", Severity::error, p.path + ".amount",
          "amount 0 is an empty red packet: a user would be granted 0 cents, spending a stock unit and a limit "
          "count on nothing; give the packet 1 cent or more");
    if (p.amount_max) {
      if (d_.kind != Kind::redpack)
        add("redpack_range", Severity::error, p.path + ".amount_max",
            "a random amount range (amount_min/amount_max) is only for kind = \"redpack\": use a fixed amount");
      else if (*p.amount_max < p.amount)
        add("redpack_range", Severity::error, p.path + ".amount_max",
            "amount_max " + std::to_string(*p.amount_max) + " is below amount_min " + std::to_string(p.amount) +
                ": swap them, or fix the range");
      else if (p.amount == 0)
        add("redpack_range", Severity::error, p.path + ".amount_min",
            "amount_min 0 allows an empty red packet: a user would be granted 0 cents, spending a stock unit "
            "and a limit count on nothing; start the range at 1 cent or more");
    }
    if (p.stock == 0)
      add("zero_stock", Severity::warning, p.path + ".stock",
          "prize " + q(p.code) + " has stock 0 and can never be granted: set its stock");
    // Every bucket is a stock row written at create time; a bucket that starts empty can only make
    // claims slower. Beyond kMaxStockBuckets the rows cost more than the contention they spread.
    if (p.stock_buckets > kMaxStockBuckets)
      add("buckets_over_max", Severity::error, p.path + ".stock_buckets",
          "prize " + q(p.code) + " asks for " + std::to_string(p.stock_buckets) + " stock buckets: use at most " +
              std::to_string(kMaxStockBuckets) + " (16 to 64 already spread the hottest prize)");
    else if (p.stock > 0 && p.stock_buckets > p.stock)
      add("buckets_over_stock", Severity::error, p.path + ".stock_buckets",
          "prize " + q(p.code) + " spreads stock " + std::to_string(p.stock) + " over " +
              std::to_string(p.stock_buckets) + " buckets, so some buckets start empty: use at most " +
              std::to_string(p.stock) + " buckets");
    if (d_.kind == Kind::lottery && p.weight <= 0)
      add("bad_weight", Severity::error, p.path + ".weight",
          "lottery prize " + q(p.code) + " has weight " + std::to_string(p.weight) +
              " and would never be drawn: give it a positive integer weight");
    if (d_.kind != Kind::lottery && p.weight != 0)
      add("weight_ignored", Severity::warning, p.path + ".weight",
          "weight only matters in a lottery; this is a " + std::string(kind_name(d_.kind)) + " activity: remove it");
    if (p.limit && p.limit->count > p.stock && p.stock > 0)
      add("limit_above_stock", Severity::warning, p.path + ".limit.count",
          "one user may get prize " + q(p.code) + " " + std::to_string(p.limit->count) + " times per " +
              period_name(p.limit->period) + " but its stock is " + std::to_string(p.stock) +
              ": one user could take all of it; lower the limit");
  }

  void lottery() {
    __int128 sum = 0;
    for (auto& p : d_.prizes)
      if (p.weight > 0) sum += p.weight;
    if (sum == 0 && !d_.prizes.empty())
      add("weights_zero", Severity::error, "prizes",
          "the prizes' weights add up to 0, so nothing can be drawn: give the prizes positive weights");
    if (!d_.consolation)
      add("no_consolation", Severity::error, "lottery.consolation",
          "a lottery needs a consolation prize (谢谢参与/保底奖) for draws whose prize is sold out: "
          "add [lottery] consolation = \"PRIZE_CODE\"");
    else if (!d_.prize(*d_.consolation))
      add("no_consolation", Severity::error, "lottery.consolation",
          "consolation prize " + q(*d_.consolation) + " is not one of the prizes" +
              suggest(*d_.consolation, prize_codes_) + ": use one of: " + list(prize_codes_));
    std::map<int64_t, size_t> nths;
    for (size_t i = 0; i < d_.guarantees.size(); ++i) {
      const Guarantee& g = d_.guarantees[i];
      std::string path = "lottery.guarantees[" + std::to_string(i) + "]";
      if (g.nth < 1)
        add("guarantee_bad_nth", Severity::error, path + ".nth",
            "nth is " + std::to_string(g.nth) + ": it counts a user's draws from 1 (nth = 10 is the 10th draw)");
      else if (auto [it, fresh] = nths.emplace(g.nth, i); !fresh)
        add("guarantee_bad_nth", Severity::error, path + ".nth",
            "draw " + std::to_string(g.nth) + " already has a guarantee (lottery.guarantees[" +
                std::to_string(it->second) + "]): keep one");
      else if (d_.limit && d_.limit->period == Period::total && d_.limit->count < g.nth)
        add("guarantee_unreachable", Severity::warning, path + ".nth",
            "a user may draw at most " + std::to_string(d_.limit->count) + " times, so draw " + std::to_string(g.nth) +
                " never happens: lower nth or raise limit.count");
      if (!d_.prize(g.prize))
        add("guarantee_unknown_prize", Severity::error, path + ".prize",
            "guarantee names prize " + q(g.prize) + ", which is not one of the prizes" + suggest(g.prize, prize_codes_) +
                ": use one of: " + list(prize_codes_));
    }
    expected_cost(sum);
  }

  // Seed 002 §2.3: the pool's expected cost per draw decides how many draws the budget carries; it
  // must be known before the activity goes live, not discovered from the bill.
  void expected_cost(__int128 weights) {
    if (weights <= 0) return;
    const auto c = expected_draw_cost(d_);
    if (!c) return;
    std::string msg = "expected cost per draw " + money(c->per_draw_cents) + " = sum(weight x cost) / sum(weight)";
    if (!d_.budget_cents) msg += "; no budget_cents is set, so only stock limits the spend";
    else if (!c->draws_covered) msg += "; the draws cost nothing";
    else {
      msg += "; the budget of " + money(*d_.budget_cents) + " covers about " + std::to_string(*c->draws_covered) +
             " draws";
    }
    add("expected_cost", Severity::info, "lottery", msg);
  }

  void redpack() {
    if (d_.prizes.size() != 1) {
      add("redpack_shape", Severity::error, "prizes",
          "a redpack activity has exactly one prize (the packet), not " + std::to_string(d_.prizes.size()) +
              ": keep one [[prizes]] with a cash item");
      return;
    }
    const PrizeDef& p = d_.prizes[0];
    const ItemDef* it = d_.item(p.item);
    if (it && it->kind != "cash")
      add("redpack_shape", Severity::error, p.path + ".item",
          "a redpack pays cash, but item " + q(it->code) + " is kind " + q(it->kind) + ": use an item with kind = \"cash\"");
  }

  // Values the engine's int64 arithmetic or the schema's columns cannot hold. Each passes parsing
  // (it is a valid int64), then would fail every claim (overflow, exit 65) or the create itself
  // (PostgreSQL "integer out of range", exit 70). Sums and products are computed in 128 bits.
  void limits() {
    auto too_large = [&](const std::string& path, const std::string& msg) {
      add("value_too_large", Severity::error, path, msg);
    };
    const __int128 kI64 = INT64_MAX;
    __int128 total_cost = 0, max_cost = 0;
    for (auto& p : d_.prizes) {
      const ItemDef* it = d_.item(p.item);
      int64_t top = std::max(p.amount, p.amount_max.value_or(p.amount));
      __int128 cost = it ? __int128(top) * it->unit_cost_cents : 0;
      if (cost > kI64)
        too_large(amount_path(p), "prize " + q(p.code) + ": " + std::to_string(top) + " units x unit_cost_cents " +
                                       std::to_string(it->unit_cost_cents) +
                                       " does not fit in 64 bits: no claim could be costed; lower the amount");
      max_cost = std::max(max_cost, cost);
      total_cost += __int128(p.stock) * cost;
      if (p.validity_days && *p.validity_days > kMaxValidityDays)
        too_large(p.path + ".validity_days", "validity_days is " + std::to_string(*p.validity_days) + ": at most " +
                                                 std::to_string(kMaxValidityDays) + " (100 years)");
    }
    // Reconcile and the ledger sum grant costs: all stock at its maximum cost must fit in int64.
    if (total_cost > kI64)
      too_large("prizes", "all stock at its maximum cost adds up to " + big(total_cost) +
                              " cents, more than 64 bits hold: costs could not be summed; lower stock or amounts");
    // consumed + cost must never overflow, whichever way a statement adds them. (A cost that alone
    // does not fit is reported above; one above half of 2^63-1 leaves room only for budgets smaller
    // than a single grant, so it is the prize's to lower, not the budget's.)
    if (d_.budget_cents && max_cost <= kI64 && __int128(*d_.budget_cents) + max_cost > kI64)
      too_large("budget_cents", "budget_cents " + std::to_string(*d_.budget_cents) +
                                    " plus one grant's cost does not fit in 64 bits: " +
                                    (kI64 - max_cost >= max_cost ? "use a budget of at most " +
                                                                std::to_string(static_cast<long long>(kI64 - max_cost))
                                                          : std::string("no budget can take a grant of this cost; "
                                                                        "lower the amount or the unit cost")));
    if (d_.kind == Kind::lottery) {
      __int128 weights = 0;
      for (auto& p : d_.prizes) weights += p.weight;
      if (weights > kI64)
        too_large("prizes", "the lottery weights add up to more than 64 bits: a draw could not be made; "
                            "use smaller weights (only their ratios matter)");
    }
    for (auto& f : d_.fuses) {
      auto int32 = [&](const std::string& field, std::optional<int64_t> v) {
        if (v && *v > kMaxInt32)
          too_large(f.path + "." + field, field + " is " + std::to_string(*v) + ": at most " +
                                              std::to_string(kMaxInt32));
      };
      int32("window_seconds", f.window_seconds);
      int32("pop_percent", f.pop_percent);
      int32("dod_percent", f.dod_percent);
    }
  }

  // In a direct or redpack activity every claim yields the prize, so an activity limit above a
  // prize's stock lets one user empty it.
  void activity_limit() {
    if (!d_.limit || d_.kind == Kind::lottery) return;
    for (auto& p : d_.prizes)
      if (p.stock > 0 && d_.limit->count > p.stock) {
        add("limit_above_stock", Severity::warning, "limit.count",
            "one user may claim " + std::to_string(d_.limit->count) + " times per " + period_name(d_.limit->period) +
                " but prize " + q(p.code) + " has stock " + std::to_string(p.stock) +
                ": one user could take all of it; lower the limit");
        return;
      }
  }

  void stock_vs_budget() {
    if (!d_.budget_cents) return;
    int64_t total = 0;
    for (auto& p : d_.prizes) total = sat_add(total, sat_mul(p.stock, d_.max_cost_cents(p)));
    if (total > *d_.budget_cents)
      add("stock_over_budget", Severity::warning, "budget_cents",
          "all stock at its maximum amount costs " + money(total) + ", over the budget of " + money(*d_.budget_cents) +
              ": grants stop when the budget runs out; lower stock or amounts, or raise budget_cents");
  }

  // The "extra zero" (多一个0) check: a prize whose per-grant cost is 10x or more the median of its
  // siblings' (those that cost anything; at least two). A lottery's grand prize is meant to cost far
  // more than the rest, so there a prize is exempt when it is also 10x rarer than the median sibling
  // weight: the dangerous slip is a common prize that suddenly costs ten times its peers.
  void outliers() {
    const size_t n = d_.prizes.size();
    std::vector<int64_t> cost(n);
    for (size_t i = 0; i < n; ++i) cost[i] = d_.max_cost_cents(d_.prizes[i]);
    auto median = [](std::vector<long double> v) {
      std::sort(v.begin(), v.end());
      size_t m = v.size();
      return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
    };
    for (size_t i = 0; i < n; ++i) {
      if (cost[i] <= 0) continue;
      std::vector<long double> sib_cost, sib_weight;
      for (size_t j = 0; j < n; ++j)
        if (j != i && cost[j] > 0) {
          sib_cost.push_back(static_cast<long double>(cost[j]));
          sib_weight.push_back(static_cast<long double>(d_.prizes[j].weight));
        }
      if (sib_cost.size() < 2) continue;
      long double mc = median(sib_cost);
      if (static_cast<long double>(cost[i]) < 10 * mc) continue;
      const PrizeDef& p = d_.prizes[i];
      if (d_.kind == Kind::lottery && static_cast<long double>(p.weight) * 10 < median(sib_weight)) continue;
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.0Lf", static_cast<long double>(cost[i]) / mc);
      add("amount_outlier", Severity::warning, amount_path(p),
          "prize " + q(p.code) + " costs " + money(cost[i]) + " per grant, " + ratio +
              "x the median of the other prizes" +
              (d_.kind == Kind::lottery ? " while it is drawn about as often (weight " + std::to_string(p.weight) + ")"
                                        : std::string()) +
              ": check its amount for an extra zero");
    }
  }

  void fuses() {
    for (auto& f : d_.fuses) {
      if (f.prize && !d_.prize(*f.prize))
        add("fuse_unknown_prize", Severity::error, f.path + ".prize",
            "fuse " + q(f.name) + " watches prize " + q(*f.prize) + ", which is not one of the prizes" +
                suggest(*f.prize, prize_codes_) + ": use one of: " + list(prize_codes_) +
                ", or leave prize out to watch the whole activity");
      if (!f.max_count && !f.max_amount_cents && !f.pop_percent && !f.dod_percent)
        add("fuse_no_threshold", Severity::error, f.path,
            "fuse " + q(f.name) + " has no threshold and can never trip: set max_count, max_amount_cents, "
            "pop_percent or dod_percent");
    }
  }

  // The budget ladder (docs/design.md §4.4): the steps come in order, they need a budget to be a ratio of,
  // and the degrade step needs something to switch off - but never the consolation prize, which is
  // where a degraded draw lands.
  void ladder() {
    const LadderDef& l = d_.ladder;
    auto ratio = [](int64_t ppm) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", double(ppm) / double(kPpm));
      return std::string(buf);
    };
    auto order = [&](const std::optional<int64_t>& lo, const char* lo_key, const std::optional<int64_t>& hi,
                     const char* hi_key) {
      if (lo && hi && *lo > *hi)
        add("ladder_order", Severity::error, std::string("budget.") + hi_key,
            std::string(hi_key) + " " + ratio(*hi) + " is below " + lo_key + " " + ratio(*lo) +
                ": the steps come in the order warn_at <= degrade_at <= stop_at");
    };
    order(l.warn_ppm, "warn_at", l.degrade_ppm, "degrade_at");
    order(l.degrade_ppm, "degrade_at", l.stop_ppm, "stop_at");
    if (!l.degrade_ppm) order(l.warn_ppm, "warn_at", l.stop_ppm, "stop_at");
    if (l.any() && !d_.budget_cents)
      add("ladder_without_budget", Severity::error, "budget",
          "[budget] sets steps of the budget ladder, but there is no budget_cents to measure them against: "
          "add budget_cents at the top level, or remove [budget]");
    bool any_high = false;
    for (auto& p : d_.prizes) {
      if (!p.high_value) continue;
      any_high = true;
      if (d_.consolation && *d_.consolation == p.code)
        add("high_value_consolation", Severity::error, p.path + ".high_value",
            "prize " + q(p.code) + " is the consolation prize, where a degraded draw lands: it cannot be high_value");
      else if (!l.degrade_ppm)
        add("high_value_unused", Severity::warning, p.path + ".high_value",
            "prize " + q(p.code) + " is high_value, which only matters from the ladder's degrade step on: "
            "add [budget] degrade_at (e.g. 0.9), or remove high_value");
    }
    if (l.degrade_ppm && !any_high)
      add("degrade_without_high_value", Severity::warning, "budget.degrade_at",
          "degrade_at switches off the prizes marked high_value = true, and none is: mark the costly prizes, "
          "or remove degrade_at");
  }

  void lists() {
    std::set<std::string> black(d_.blacklist.begin(), d_.blacklist.end());
    for (size_t i = 0; i < d_.gray_users.size(); ++i)
      if (black.count(d_.gray_users[i]))
        add("gray_overlaps_blacklist", Severity::warning, "gray.users[" + std::to_string(i) + "]",
            "user " + q(d_.gray_users[i]) + " is on both the gray list and the blacklist, so the gray test cannot "
            "use it: remove it from one of them");
  }
};

}  // namespace

std::vector<Finding> lint(const Definition& d, const LintContext& ctx) { return Linter(d, ctx).run(); }

}  // namespace rc::activity
