#pragma once
// Rule 4, risk: a blacklisted user gets nothing, an activity whose fuse tripped grants nothing, and a
// prize held by its own fuse is skipped (a lottery then degrades to its consolation prize).
#include <cstdint>
#include <set>
#include <string>

#include "core/engine/activity_gate.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// Why risk refuses this user in this activity (blacklisted, held_by_fuse), or Reason::none.
Reason risk_rejection(const ActivityGate& a);

// The ids of the activity's prizes held by a fuse (read only when the gate says there are some).
std::set<int64_t> blocked_prizes(store::Session& s, const ActivityGate& a);

}  // namespace rc::engine
