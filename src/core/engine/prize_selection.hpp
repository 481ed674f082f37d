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

// The candidates for this claim. A lottery draws with `draw` (a value in [0, total)), unless `drawn`
// holds a value already drawn under this catalog's version: that draw is kept (the one-statement
// path drew it, and its refusal must not buy a second draw). Throws Rejection (sold_out: nothing
// left to draw; not_found: the requested prize does not exist).
Selection select_prizes(store::Session& s, const ActivityCatalog& cat, const std::optional<std::string>& requested,
                        const std::string& user, Millis now, const std::function<int64_t(int64_t)>& draw,
                        std::optional<int64_t> drawn = std::nullopt);

// The amount to grant of prize p: its fixed amount, or for a red packet a random amount in its
// range (`draw` gives a value in [0, n)) capped by the budget left. `drawn`: an amount already
// drawn for p under this catalog's version (the one-statement path's), kept instead of drawing
// again. Throws Rejection{budget_exhausted} when even the minimum no longer fits.
int64_t grant_amount(store::Session& s, const ActivityCatalog& cat, const PrizeInfo& p,
                     const std::function<int64_t(int64_t)>& draw, std::optional<int64_t> drawn = std::nullopt);
// A red packet's random amount of p, in [p.amount, p.amount_max], from `draw` (a value in [0, n)).
int64_t redpack_draw(const PrizeInfo& p, const std::function<int64_t(int64_t)>& draw);

}  // namespace rc::engine
