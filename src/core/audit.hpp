#pragma once
// The two trails every change leaves: a status-log row per state change (written in the same
// transaction as the conditional update that made it) and an audit row per operator action.
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/states.hpp"
#include "core/store/store.hpp"

namespace rc {

struct StatusChange {
  std::string entity;  // activity, grant, qualification, list_batch, list_item, resend_bill, fuse_event
  int64_t entity_id;
  std::optional<std::string> from;  // empty for a creation
  std::string to;
  std::string actor;
  std::optional<std::string> reason;
  std::optional<std::string> request_id;  // unique per (entity, entity_id) when given: makes retries no-ops
};

// The head of every status-log insert, spelled once. A change of one row goes through log_status
// (or transition); the set-based statements that move many rows at once - an UPDATE ... RETURNING
// in a CTE, then INSERT ... SELECT, or one VALUES list - append their SELECT or VALUES to this head,
// giving every column in this order: entity, entity_id, from_state, to_state, actor, reason,
// request_id, created_at.
inline const std::string kStatusLogInsert =
    "INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, request_id, created_at) ";

// REQUIRES: called inside the transaction that made the change.
void log_status(store::Session& s, const StatusChange& c, Millis now);

// Moves `entity` row `id` of `table` from `from` to `to` with one conditional update, and logs it.
// Returns false (and writes nothing) when the row was not in state `from`: someone else won.
// `extra_set` is appended to the SET list (e.g. ", reason = $5") with `extra` bound after the first
// four parameters ($1 to, $2 now, $3 id, $4 from).
bool transition(store::Session& s, const std::string& table, const std::string& entity, int64_t id,
                const std::string& from, const std::string& to, const std::string& actor,
                const std::optional<std::string>& reason, Millis now, const std::string& extra_set = "",
                const store::Params& extra = {}, const std::optional<std::string>& request_id = std::nullopt);

// The same for a state machine of states.hpp: the table and the status-log entity come from
// StateMachine<E>, the state names from E's table.
template <class E>
bool transition(store::Session& s, int64_t id, E from, E to, const std::string& actor,
                const std::optional<std::string>& reason, Millis now, const std::string& extra_set = "",
                const store::Params& extra = {}, const std::optional<std::string>& request_id = std::nullopt) {
  return transition(s, StateMachine<E>::table, StateMachine<E>::entity, id, name(from), name(to), actor, reason, now,
                    extra_set, extra, request_id);
}

// The status-log row of a creation (no from state) in a state machine of states.hpp.
// REQUIRES: called inside the transaction that created the row.
template <class E>
void log_created(store::Session& s, int64_t id, E to, const std::string& actor, const std::optional<std::string>& reason,
                 Millis now) {
  log_status(s, {StateMachine<E>::entity, id, std::nullopt, name(to), actor, reason, std::nullopt}, now);
}

// The status-log row of a move the caller made itself (one statement moving many rows, or a
// conditional update that also sets other columns). REQUIRES: inside the transaction that moved it.
template <class E>
void log_moved(store::Session& s, int64_t id, E from, E to, const std::string& actor,
               const std::optional<std::string>& reason, Millis now,
               const std::optional<std::string>& request_id = std::nullopt) {
  log_status(s, {StateMachine<E>::entity, id, std::string(name(from)), name(to), actor, reason, request_id}, now);
}

// One row per mutating operator action. detail is a JSON object text.
void audit(store::Session& s, const std::string& op, const std::string& action, const std::string& entity,
           const std::string& key, const std::string& detail_json, Millis now);

}  // namespace rc
