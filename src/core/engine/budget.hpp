#pragma once
// Rule 8a, the budget: an activity with a budget never grants more cost (amount x unit cost, in
// cents) than it authorised. Taken with one conditional update on the budget row (consumed + cost
// <= authorised), after the grant row and before stock, so the hot row's lock is held briefly.
// With a budget ladder (budget_ladder.hpp) the same update also refuses past the stop step, and past
// the degrade step for a high-value prize, and returns what the step now is: no extra round trip.
#include <cstdint>
#include <optional>

#include "core/budget_ladder.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// How a claim on an activity with a ladder takes budget.
struct LadderTake {
  bool high_value = false;  // the prize is switched off from the degrade step on
  std::string code;         // the activity's, for the move's description
  std::string actor;        // for the status-log row of a step move
  Millis now = 0;
};

// Takes `cost_cents` from the activity's budget. Throws Rejection{budget_exhausted} when it would
// go over. With `ladder` (the activity has one): also Rejection{budget_exhausted} from the stop step
// on, and Rejection{budget_degrade} for a high-value prize from the degrade step on; a cost of 0 is
// then checked by a read (no row lock). Returns the step move this take made (logged in the
// transaction; the caller announces it after commit), if any.
std::optional<LadderMove> take_budget(store::Session& s, int64_t activity_id, int64_t cost_cents,
                                      const LadderTake* ladder = nullptr);

// Gives `cost_cents` back (a reversal; never below zero consumed). The ladder's step follows at the
// next claim that takes budget or the next budget change.
void return_budget(store::Session& s, int64_t activity_id, int64_t cost_cents);

// How many more takes of `cost_cents` each the budget allows from now, as take_budget decides them
// one after the other: within the authorised budget, and with a ladder each take starting below the
// stop threshold (and, for a high-value prize, below the degrade threshold). A cost of 0 is
// unlimited (INT64_MAX) until a threshold is reached. nullopt: the activity has no budget.
// For sizing a batch before it runs (list-issue plan); the conditional update still decides.
std::optional<int64_t> budget_takes_left(store::Session& s, int64_t activity_id, int64_t cost_cents, bool high_value);

// Cents left now (0 when the activity has no budget row). A hint for sizing a red packet: the
// conditional update in take_budget still decides.
int64_t budget_left_cents(store::Session& s, int64_t activity_id);

}  // namespace rc::engine
