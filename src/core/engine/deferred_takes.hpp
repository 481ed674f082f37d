// The hot rows once per chunk (engine.hpp, claim_many): the budget and stock takes that a chunk's
// requests deferred, made at the chunk's end, and the bucket locks of a chunk that takes as it goes.
#pragma once

#include <vector>

#include "core/engine/engine.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// The chunk's deferred takes, once each, budget before stock (the order of a claim): true when all
// of them fitted. REQUIRES: inside the chunk's write transaction; on false the caller rolls the
// chunk back to its start and runs it again taking as it goes.
bool take_deferred(store::Tx& tx, const std::vector<HotTake>& takes);

// Before a chunk that the deferred takes did not cover runs again taking as it goes (PostgreSQL):
// the buckets of each prize it takes without budget, locked in order (take_deferred's order).
void lock_buckets(store::Tx& tx, const std::vector<HotTake>& takes);

}  // namespace rc::engine
