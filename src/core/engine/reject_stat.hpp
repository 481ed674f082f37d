#pragma once
// Rejected claims, counted (table claim_reject, migration 0008).
//
// A rejected claim writes nothing of its own: its transaction rolls back. So that `report` can
// draw "rejected by reason" over time, the rejection is counted afterwards, per activity, UTC
// minute and reason, by one upsert in its own short transaction. The count is a statistic, not a
// book: a failure to write it is logged (WARN) and never changes the claim's answer, and reconcile
// does not check it. Dry runs, replays and held requests are not counted.
#include <string>

#include "core/clock.hpp"
#include "core/engine/reason.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// Adds one to (activity, minute of `now`, reason). An unknown activity code counts nothing.
void count_rejection(store::Store& st, const std::string& activity_code, Reason reason, Millis now);

}  // namespace rc::engine
