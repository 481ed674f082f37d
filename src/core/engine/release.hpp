#pragma once
// Giving back what a claim took, and the end of a failed delivery.
//
// give_back: a grant that ends without its prize staying with the user (reversed, or failed) returns
// what its claim took: the limit counts of the period it was made in (not today's), its cost to the
// budget, and one unit of stock to the bucket it came from - in the order a claim takes them
// (limits, budget, stock last), so it never deadlocks against a claim on lock order.
//
// release_holdings: a grant that ends `failed` - the channel's final "no", an outbox reported
// failed, or an operator abandoning its resend - never reached the user, so it gives back what it
// held, exactly once, decided twice over: only the caller that won the conditional move to `failed`
// calls it, and its status-log row carries the request id "release", unique per grant, so a second
// release writes nothing.
#include <cstdint>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

struct GivenBack {
  int64_t bucket = 0;        // the stock bucket the unit went back to
  int64_t budget_cents = 0;  // returned to the activity's budget (0 without a budget)
};

// REQUIRES: inside the transaction of the conditional update that ended grant `grant_id`.
GivenBack give_back(store::Session& tx, int64_t grant_id);

struct Released {
  GivenBack back;
  std::string note;  // as written in the status log
};

// REQUIRES: inside the transaction that moved grant `grant_id` to `failed` (its state is checked).
// Returns nullopt, changing nothing, when the grant was released before or is not failed.
std::optional<Released> release_holdings(store::Session& tx, int64_t grant_id, const std::string& actor,
                                         const std::string& why, Millis now);

// The release note of a grant (what `record show` prints as "released"), or nullopt.
std::optional<std::string> release_note(store::Session& s, int64_t grant_id);

}  // namespace rc::engine
