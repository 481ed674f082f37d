#pragma once
// Rule 8b, stock: a prize is never granted more often than its stock. Stock may be split into
// buckets (rows) so that concurrent claims of one hot prize do not all queue on one row: a user
// starts at their own bucket (stable per user) and moves on to the next when it is empty. Each take
// is one conditional update (remain > 0); stock is taken last in the claim, so its row lock is held
// for the shortest time.
#include <cstdint>
#include <optional>
#include <string>

#include "core/store/store.hpp"

namespace rc::engine {

// The bucket a user tries first: spreads users over buckets, stable per user.
int64_t preferred_bucket(const std::string& user, int64_t buckets);

// Takes one unit of the prize from bucket `first`, or else from the next bucket that holds stock
// (found by one statement, however many buckets). Returns the bucket it came from, or nullopt when
// every bucket is empty (sold out): at most three statements when nothing competes.
std::optional<int64_t> take_stock(store::Session& s, int64_t prize_id, int64_t buckets, int64_t first);

// Takes n units from one bucket in one conditional update (remain >= n): all of them, or none
// (false). For a chunk of claims that takes its stock once, just before its commit (claim_many).
bool take_stock_units(store::Session& s, int64_t prize_id, int64_t bucket, int64_t n);

// Puts one unit back into the bucket it came from (a reversal).
void return_stock(store::Session& s, int64_t prize_id, int64_t bucket);

}  // namespace rc::engine
