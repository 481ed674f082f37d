#pragma once
// Rule 1, idempotency by biz_id: a request is applied at most once. A replay (same biz_id, same
// user and activity) returns the original grant and changes nothing, whatever else has changed
// since (stock, window, state); the same biz_id from another user or activity is a conflict. It is
// checked first so that no later rule can give a replay a second effect, and the unique key on
// grants.biz_id decides between concurrent twins.
#include <cstdint>
#include <string>

#include "core/engine/engine.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// Thrown inside a claim's transaction when a twin with the same biz_id has committed: abandon the
// transaction and answer as a replay of that twin.
struct TwinWon {};

// True when a grant with biz_id exists other than own_grant_id (0: none of our own). A new statement
// sees a twin that committed while this transaction waited on a lock.
bool twin_committed(store::Session& s, const std::string& biz_id, int64_t own_grant_id = 0);

// The answer to a request whose biz_id already has grant g: replayed (with g) when g is the same
// user's in the same activity (held, reason held_by_fuse, when g is still held by a fuse), otherwise
// rejected with biz_id_conflict.
void answer_replay(const ClaimRequest& r, const GrantView& g, ClaimOutcome& out);

}  // namespace rc::engine
