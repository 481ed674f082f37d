#pragma once
// Rule 5, per-user limits: at most N grants per user per period (total, day, week, month — the
// period that contains the claim's time in the activity's own zone), for the activity and for each
// prize. A limit is one conditional counter update (used < N), so concurrent claims of one user
// cannot overshoot it. A reversal gives the count back to the period the grant was made in.
#include <cstdint>
#include <string>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// Limit-counter scopes: "a:<activity id>", "p:<prize id>", "d:<activity id>" (the draw count).
std::string scope_activity(int64_t id);
std::string scope_prize(int64_t id);
std::string scope_draws(int64_t id);

// Counts one more grant for (scope, user, period_key). Throws Rejection{limit_reached} when `limit`
// are already counted (or limit <= 0).
void take_limit(store::Session& s, const std::string& scope, const std::string& user, const std::string& period_key,
                int64_t limit, Millis now);

// Gives one count back (never below zero).
void return_limit(store::Session& s, const std::string& scope, const std::string& user, const std::string& period_key);

// Counts one more lottery draw of the user in the activity and returns the new count (1 for the
// first draw): the n of "the nth draw is guaranteed prize X".
int64_t count_draw(store::Session& s, int64_t activity_id, const std::string& user, Millis now);

}  // namespace rc::engine
