#pragma once
// list-issue internals shared by its .cpp files: the batch row, read once per query into a struct,
// and the fingerprint an approval is bound to.
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/states.hpp"
#include "core/store/store.hpp"

namespace rc::jobs::list_issue {

struct BatchRow {
  int64_t id = 0, activity_id = 0, prize_id = 0, total = 0, cost_cents = 0, rejected = 0;
  std::string batch_no, activity, prize, file_name, file_sha256, definition_hash, created_by;
  ListBatchState state = ListBatchState::planned;
  std::optional<std::string> approved_by, approved_fingerprint, last_error;
  bool fits = false;
  Millis created_at = 0, updated_at = 0;
};

// The batch, or nullopt. for_update: lock the row until the transaction ends (PostgreSQL).
std::optional<BatchRow> find_batch(store::Session& s, const std::string& batch_no, bool for_update = false);
// Throws Error(data) "no list-issue batch ..." when missing.
BatchRow get_batch(store::Session& s, const std::string& batch_no, bool for_update = false);

// What an approval approves: the batch as planned (list, activity version, users, cost, planner).
// A change to any of them after approval makes the run refuse.
std::string fingerprint(const BatchRow& b);

// Moves the batch from -> to with one conditional update and a status-log row. False: not in `from`.
bool move_batch(store::Session& s, const BatchRow& b, ListBatchState from, ListBatchState to,
                const std::string& actor, const std::optional<std::string>& reason, Millis now,
                const std::string& extra_set = "", const store::Params& extra = {});

}  // namespace rc::jobs::list_issue
