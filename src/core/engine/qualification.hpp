#pragma once
// Rule 3, the qualification (whitelist): an activity that requires one grants only to a user with
// an unused, unexpired qualification, and the claim uses it up (unused -> used) with one conditional
// update, so two concurrent claims cannot both use it. The status-log row is written with the grant
// (log_qualification_used), once the grant's record code is known.
#include <cstdint>
#include <string>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// Moves the user's qualification unused -> used and returns its id. Throws Rejection
// (qualification_used, not_qualified) when there is none to use.
int64_t use_qualification(store::Session& s, int64_t activity_id, const std::string& user, Millis now);

// The status-log row of that move, naming the grant it paid for.
void log_qualification_used(store::Session& s, int64_t qualification_id, const std::string& actor,
                            const std::string& record_code, Millis now);

}  // namespace rc::engine
