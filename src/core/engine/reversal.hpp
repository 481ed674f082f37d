#pragma once
// Reversal (a refund or cancellation): success -> reversed, giving back what the claim took — the
// limit counts of the period the grant was made in, the budget, and the stock to the bucket it came
// from — and debiting the ledger credit. Returned in the order a claim takes them (limits, budget,
// stock last), so a reversal and a claim never deadlock on lock order. A repeat with the same
// request id does nothing (replayed). Money delivered outside this database (webhook, outbox) is not
// taken back here: such a grant is reversed only when the caller asserts downstream_reversed, or the
// activity could spend the same budget twice.
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/engine/grant_view.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

struct ReverseOutcome {
  bool changed = false;
  bool replayed = false;  // the same request id was applied before: nothing to do
  std::string state, message;
  std::optional<GrantView> grant;
};

// Throws Error(not_found) when there is no grant with that record code. A grant that is not in success,
// or one delivered outside the database without downstream_reversed, is refused (changed = false,
// the message says why).
ReverseOutcome reverse(store::Store& st, const std::string& record_code, const std::string& reason,
                       const std::optional<std::string>& request_id, const std::string& actor, Millis now,
                       bool dry_run = false, bool downstream_reversed = false);

}  // namespace rc::engine
