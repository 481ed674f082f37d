#pragma once
// Rule 8a, the budget: an activity with a budget never grants more cost (amount x unit cost, in
// cents) than it authorised. Taken with one conditional update on the budget row (consumed + cost
// <= authorised), after the grant row and before stock, so the hot row's lock is held briefly.
#include <cstdint>

#include "core/store/store.hpp"

namespace rc::engine {

// Takes `cost_cents` from the activity's budget. Throws Rejection{budget_exhausted} when it would
// go over.
void take_budget(store::Session& s, int64_t activity_id, int64_t cost_cents);

// Gives `cost_cents` back (a reversal; never below zero consumed).
void return_budget(store::Session& s, int64_t activity_id, int64_t cost_cents);

// Cents left now (0 when the activity has no budget row). A hint for sizing a red packet: the
// conditional update in take_budget still decides.
int64_t budget_left_cents(store::Session& s, int64_t activity_id);

}  // namespace rc::engine
