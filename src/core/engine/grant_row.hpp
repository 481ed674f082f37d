#pragma once
// Rule 7, the grant row: a claim that passed every check becomes one grants row in state init plus
// its status-log row, in the claim's transaction. The unique biz_id decides between concurrent
// twins: the loser's insert does nothing and it answers as a replay.
#include <cstdint>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

struct NewGrant {
  std::string record_code, biz_id, user, channel;
  int64_t activity_id = 0, prize_id = 0, amount = 0, cost_cents = 0, bucket = 0;
  std::optional<int64_t> draw_value, pool_version, degraded_from, list_item_id, expires_at;
  std::optional<std::string> source;
  std::optional<std::string> reason;  // budget_degrade: a draw the budget ladder moved to the consolation prize
  std::string actor, why;  // for the status-log row
};

// Inserts the grant (init) and its status-log row; returns its id, or nullopt when a grant with the
// same biz_id exists (a twin won). On PostgreSQL both rows go in one round trip, which also reads the
// activity's version: when g.pool_version (the definition version the claim followed) is no longer
// it, throws store::Retryable and the claim runs again under the new version.
std::optional<int64_t> insert_grant(store::Session& s, const NewGrant& g, Millis now);

// Records the bucket the stock actually came from, when it differs from the one first tried.
void set_grant_bucket(store::Session& s, int64_t grant_id, int64_t bucket);

}  // namespace rc::engine
