#pragma once
// The resend bill of a remote delivery: pending from before the call on, so that a crash during the
// call leaves a due resend with the same bill number instead of a stranded grant; done or manual
// once the outcome is known; rescheduled with exponential backoff after a retryable or unknown one.
#include <cstdint>
#include <string>

#include "core/clock.hpp"
#include "core/engine/bill.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// Creates the grant's pending resend bill (due at `due`, given up at `expires`) unless it has one.
void ensure_resend(store::Session& s, const DeliveryTarget& t, const std::string& bill, Millis due, Millis expires,
                   const std::string& actor, Millis now);

// Moves the grant's pending resend bills to `to` (done, manual), each with its status-log row.
void finish_resend(store::Session& s, int64_t grant_id, ResendState to, const std::string& actor,
                   const std::string& why, Millis now);

// True when the grant has a pending resend bill due at `now`.
bool resend_due(store::Session& s, int64_t grant_id, Millis now);

// Counts a failed attempt and sets the next one: resend_delay_ms from now.
void reschedule_resend(store::Session& s, int64_t grant_id, int64_t first_delay_ms, const std::string& why, Millis now);

// The wait before resend attempt `attempts` + 1: first_ms doubling per attempt, capped at cap_ms,
// less up to a fifth at random (jitter: bills that failed together do not all return together).
// Always in [0.8 x base, base] where base = min(first_ms x 2^attempts, cap_ms).
int64_t resend_delay_ms(int64_t attempts, int64_t first_ms, int64_t cap_ms = 3'600'000);

}  // namespace rc::engine
