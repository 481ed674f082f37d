#pragma once
// Rule 6, prize selection — the only step in which the kinds differ. direct: the requested prize
// (default the first); lottery: a guaranteed prize on the user's nth draw, else a weighted draw,
// degrading to the consolation prize when the drawn one cannot be granted; redpack: a random amount
// in the prize's range, never more than the budget left.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/catalog.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

struct Selection {
  std::vector<size_t> candidates;    // indexes into the catalog's prizes, best first
  std::optional<int64_t> draw_value; // the lottery's random value, kept on the grant for audit
};

// A random value in [0, n) (Engine::draw_below).
using Draw = std::function<int64_t(int64_t n)>;

// A draw is made once per claim. `kept` is a value already drawn for this claim under the catalog's
// version (ClaimRequest::drawn_under: the one-statement path drew it, and its refusal must not buy a
// second draw); it is used when it lies in the range, else a new value is drawn.
// A lottery's value, in [0, total weight). REQUIRES: cat.pool.total() > 0.
int64_t lottery_value(const ActivityCatalog& cat, std::optional<int64_t> kept, const Draw& draw);
// A red packet's smallest amount: amount_min, but never an empty packet - a range from 0 (refused by
// lint; a definition stored before may have one) starts at 1 cent. (A range [0, 0] stays 0, and
// grant_amount refuses it: there is no packet to give.) REQUIRES: p.amount_max.
int64_t redpack_least(const PrizeInfo& p);
// A red packet's amount of p, in [redpack_least(p), p.amount_max]. REQUIRES: p.amount_max.
int64_t redpack_amount(const PrizeInfo& p, std::optional<int64_t> kept, const Draw& draw);

// The candidates for this claim; a lottery's value is lottery_value(cat, kept, draw). Throws
// Rejection (sold_out: nothing left to draw; not_found: the requested prize does not exist).
Selection select_prizes(store::Session& s, const ActivityCatalog& cat, const std::optional<std::string>& requested,
                        const std::string& user, Millis now, const Draw& draw,
                        std::optional<int64_t> kept = std::nullopt);

// The amount to grant of prize p: its fixed amount, or for a red packet redpack_amount(p, kept,
// draw) capped by the budget left. Throws Rejection{budget_exhausted} when even the minimum no
// longer fits, and for a red packet of 0 (a stored fixed amount 0 or range [0, 0]: never granted).
int64_t grant_amount(store::Session& s, const ActivityCatalog& cat, const PrizeInfo& p, const Draw& draw,
                     std::optional<int64_t> kept = std::nullopt);

}  // namespace rc::engine
