#pragma once
// The one-statement claim (PostgreSQL; docs/design.md §4, "One round trip"). The common claim - a
// direct prize, a lottery's drawn prize (no guaranteed draws) or a red packet's drawn amount,
// delivered through the built-in ledger or after the commit (webhook) or not at all, on an activity
// whose rules this process read -
// is one call of rewardctl_claim_one (sql/0012_claim_one_statement.sql, given the draw by
// sql/0014_claim_one_draw.sql) outside any explicit transaction: one round trip and one commit
// instead of the full flow's eight statements. A lottery or red packet is drawn once, by the caller:
// when the statement does not grant, the full flow keeps that draw (and degrades it to the
// consolation prize, or caps the amount by the budget left, if it must), so a refusal never buys a
// second draw. A red packet is granted here only when the budget covers its amount whole.
//
// Contract: the function grants only when every rule lets it, and then writes exactly what the full
// flow (claim.cpp) writes for the same claim, by the same conditional updates in the same order, with
// one difference: a grant delivered through the ledger is inserted once in its delivered state (success, with its bill number)
// rather than inserted in init and then moved, because no other transaction can see it in between;
// its status log still reads NULL -> init -> success. Its gate is stricter than the full flow's (live
// only, no blocked prize anywhere in the activity, the preferred stock bucket only). Whenever it does
// not grant - a refusal, a replay, a concurrent twin, a version switch - it writes nothing and says
// so, and the caller runs the full flow, which decides and answers. So a claim answered here is a
// claim the full flow would have granted, and every refusal still comes from one place.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// One per-user limit to take: the counter's scope and period, and the limit.
struct LimitTake {
  std::string scope, period_key;
  int64_t limit = 0;
};

// Everything the function needs, computed by the caller from the activity's cached rules.
struct OneStatementClaim {
  int64_t activity_id = 0, version = 0, prize_id = 0, amount = 0, cost_cents = 0, bucket = 0;
  std::string activity_code, user, biz_id, record_code, channel, actor, why;
  std::optional<std::string> source;
  std::optional<int64_t> expires_at;
  std::optional<int64_t> draw_value;  // a lottery's draw, kept on the grant (rewardctl_claim_one only)
  std::optional<LimitTake> activity_limit, prize_limit;
  bool take_budget = false;  // the activity has a budget and the grant costs something
  // Delivered through the ledger in the same statement when set: its bill number, the asset
  // credited and the bill's message. Unset: the grant stays in init (the caller delivers after
  // the commit, or never).
  std::optional<std::string> bill_no;
  std::string asset, bill_message;
};

// Runs the claim as one statement in autocommit on s (a PostgreSQL session outside a transaction).
// Returns the new grant's id; nullopt when it did not grant, with nothing written. Throws what the
// store throws (store::Retryable for a deadlock or serialization failure, store::UniqueViolation for
// a record code or bill number taken).
std::optional<int64_t> claim_one_statement(store::Session& s, const OneStatementClaim& c, Millis now);

// A chunk of claims as one statement (rewardctl_claim_chunk, sql/0013_claim_chunk.sql): the set-based
// form of the same claim for list-issue's chunks (Engine::claim_many). Every request is for the same
// prize of the same activity, each for a different user under a different biz_id. Same contract,
// for the chunk as a whole: it grants every request, writing what the full flow writes for each, or
// none, writing nothing; the caller then runs the chunk through the full flow, which answers each
// request. It runs inside the caller's transaction (the chunk's).
struct ChunkItem {
  std::string user, biz_id, record_code;
  std::optional<std::string> bill_no, source;  // bill_no: as OneStatementClaim's, for this grant
  std::optional<int64_t> list_item_id;
  int64_t bucket = 0;  // the user's preferred bucket
};
struct OneStatementChunk {
  // the rules shared by every request: activity, version, prize, amount, cost, channel, expiry,
  // actor, why, limits, asset and bill message (its per-request fields are unused)
  OneStatementClaim shared;
  std::vector<ChunkItem> items;
  std::optional<int64_t> budget_cents;  // the chunk's cost, taken from the budget at once; unset: none
};

// Runs the chunk as one statement in the caller's transaction on s. Returns the new grants' ids in
// request order; nullopt when it granted nothing, with nothing written (also, without a statement,
// when a request holds text that is not valid UTF-8). Throws what the store throws
// (the transaction is then aborted: store::Retryable for a deadlock).
std::optional<std::vector<int64_t>> claim_chunk_statement(store::Session& s, const OneStatementChunk& c, Millis now);

}  // namespace rc::engine
