#include "core/engine/prize_selection.hpp"

#include <algorithm>

#include "core/engine/budget.hpp"
#include "core/engine/limits.hpp"
#include "core/engine/rejection.hpp"

namespace rc::engine {

int64_t lottery_value(const ActivityCatalog& cat, std::optional<int64_t> kept, const Draw& draw) {
  const int64_t total = cat.pool.total();
  return kept && *kept >= 0 && *kept < total ? *kept : draw(total);
}

int64_t redpack_least(const PrizeInfo& p) { return *p.amount_max >= 1 ? std::max<int64_t>(p.amount, 1) : p.amount; }

int64_t redpack_amount(const PrizeInfo& p, std::optional<int64_t> kept, const Draw& draw) {
  const int64_t lo = redpack_least(p);
  if (kept && *kept >= lo && *kept <= *p.amount_max) return *kept;
  // (parse and lint keep 0 <= amount <= amount_max; a span of 2^63 values has no int64 count)
  const int64_t span = *p.amount_max - lo;
  if (span == INT64_MAX) return random_between(lo, *p.amount_max);
  return lo + draw(span + 1);
}

Selection select_prizes(store::Session& s, const ActivityCatalog& cat, const std::optional<std::string>& requested,
                        const std::string& user, Millis now, const Draw& draw, std::optional<int64_t> kept) {
  Selection sel;
  if (cat.prizes.empty()) throw Rejection{Reason::sold_out};
  if (cat.kind == activity::Kind::lottery) {
    std::optional<size_t> chosen;
    if (!cat.guarantees.empty()) {
      auto it = cat.guarantees.find(count_draw(s, cat.id, user, now));
      if (it != cat.guarantees.end()) chosen = it->second;
    }
    if (!chosen) {
      if (cat.pool.total() <= 0) throw Rejection{Reason::sold_out};
      sel.draw_value = lottery_value(cat, kept, draw);
      chosen = cat.pool.pick(*sel.draw_value);
    }
    sel.candidates.push_back(*chosen);
    if (cat.consolation && *cat.consolation != *chosen) sel.candidates.push_back(*cat.consolation);
  } else if (requested) {
    const PrizeInfo* p = cat.prize(*requested);
    if (!p) throw Rejection{Reason::not_found};
    sel.candidates.push_back(size_t(p - cat.prizes.data()));
  } else {
    sel.candidates.push_back(0);
  }
  return sel;
}

int64_t grant_amount(store::Session& s, const ActivityCatalog& cat, const PrizeInfo& p, const Draw& draw,
                     std::optional<int64_t> kept) {
  if (cat.kind != activity::Kind::redpack) return p.amount;
  // an empty packet is never granted: a stored fixed amount 0 or range [0, 0] (lint refuses both)
  // has nothing to give
  if (!p.amount_max || *p.amount_max < 1) {
    if (p.amount < 1) throw Rejection{Reason::budget_exhausted};
    if (!p.amount_max) return p.amount;
  }
  int64_t amount = redpack_amount(p, kept, draw);
  if (cat.has_budget && p.unit_cost_cents > 0) {
    // Never more than the budget left: the conditional update in take_budget still decides. Nor
    // an empty packet: less than one cent left is an exhausted budget, not a grant of 0 cents.
    int64_t left_units = budget_left_cents(s, cat.id) / p.unit_cost_cents;
    if (left_units < std::max<int64_t>(redpack_least(p), 1)) throw Rejection{Reason::budget_exhausted};
    amount = std::min(amount, left_units);
  }
  return amount;
}

}  // namespace rc::engine
