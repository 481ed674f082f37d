#pragma once
// list-issue (名单直发): one prize to every user of a CSV list — compensation after an incident, a
// contest's winners, a targeted gift. It is the biggest write an operator makes with this tool, so a
// batch is planned (checked and stored, nothing issued), approved by a second person, and only then
// run; a run can be killed at any moment and run again.
//
// Batch states (each change: one conditional UPDATE + one status-log row, same transaction):
//   planned -> approved -> running -> done;  planned|approved|running -> cancelled
// Item states: pending -> issued | rejected (reason code) | failed (delivery) | cancelled | held;
//   held -> issued | rejected | cancelled, and issued -> failed. `held`: a fuse blocks the prize,
//   the item's claim is a pending grant (held_by_fuse, its record code on the item) and the run goes
//   on with the other items; the fuse's decision (release / confirm, or cancel of the batch) moves
//   the grant and its item in one transaction (core/engine/held.hpp). The batch goes done only
//   when no item is pending or held: a run after the fuse's decision closes it.
//
// Every item is claimed through the engine's common flow with biz_id = "<batch no>:<user>", so a
// rerun, an overlap or a second worker can never issue twice: the grant's unique biz_id decides.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/engine/engine.hpp"
#include "core/states.hpp"
#include "core/store/store.hpp"
#include "jobs/input/reject_limit.hpp"
#include "jobs/runtime/progress.hpp"
#include "jobs/runtime/runner.hpp"

namespace rc::jobs::list_issue {

// The idempotency key of one item's grant.
std::string item_biz_id(const std::string& batch_no, const std::string& user);

struct PlanOptions {
  std::string activity, prize, file;  // file: path or "-" (standard input)
  std::string rejects_path;           // default FILE.rejects.csv
  import::RejectLimit max_rejects;    // as import-qualifications: default 0
  bool allow_partial = false;         // store the batch although stock or budget do not cover it
  bool dry_run = false;               // check and count everything, store nothing
  std::string operator_name;
  ProgressMode progress = ProgressMode::none;
};

struct PlanResult {
  std::string batch_no, activity, prize, file, sha256, definition_hash, rejects_path, limit;
  int64_t read = 0, users = 0, duplicates = 0, rejected = 0;
  int64_t unit_cost_cents = 0, cost_cents = 0;  // per grant and for every user
  int64_t stock_left = 0;
  std::optional<int64_t> budget_left;  // none: the activity has no budget
  // Grants of this prize the budget allows from now, its ladder included (each take must start
  // below stop_at, and below degrade_at for a high-value prize). None: no budget, or no limit.
  std::optional<int64_t> budget_grants;
  bool fits = false;        // stock and budget (its ladder included) cover every user
  bool stored = false;      // the batch was stored (planned)
  bool over_limit = false;  // more rejected rows than --max-rejects: nothing stored
  bool dry_run = false;
};

// Reads and dedupes the list (the row rules and rejects file of import-qualifications), and stores
// the batch (state planned) with its items, the file's SHA-256 and the activity's definition hash,
// in one transaction. Nothing is stored when rejects are over the limit, when stock or budget do not
// cover the list and allow_partial is off, or on dry_run; the result says which.
// Throws Error(no_input) for a missing file, Error(data) for an unknown activity or prize, a broken
// file (naming FILE:LINE) or a list with no valid user.
PlanResult plan(store::Store& st, const PlanOptions& o, const Clock& clock);

struct Change {
  std::string batch_no, from, to;
  bool changed = false, dry_run = false;
  int64_t items = 0;    // cancel: pending items cancelled (or that would be)
  std::string message;  // for people: what happened, or why nothing did
};

// planned -> approved, bound to the batch as planned (its fingerprint: file, definition hash, users,
// cost, planner). Error(no_perm) when the approver is the planner; Error(data) for an unknown
// batch; changed = false (naming the state) when it is not planned.
Change approve(store::Store& st, const std::string& batch_no, const std::string& approver, Millis now,
               bool dry_run);
// planned|approved|running -> cancelled, every pending item -> cancelled, and every held item ->
// cancelled with its held grant (pending -> cancelled). A worker that is running the batch stops
// after its current chunk.
Change cancel(store::Store& st, const std::string& batch_no, const std::string& operator_name,
              const std::optional<std::string>& reason, Millis now, bool dry_run);

struct Status {
  std::string batch_no, activity, prize, state, file_name, file_sha256, definition_hash, created_by;
  std::optional<std::string> approved_by, last_error;
  int64_t total = 0, pending = 0, issued = 0, rejected = 0, failed = 0, cancelled = 0;
  int64_t held = 0;  // waiting on a fuse event's decision
  int64_t cost_cents = 0, rejected_rows = 0;
  double rate_per_s = 0;            // items finished per second over the last minute
  std::optional<int64_t> eta_s;     // pending / rate, when something is moving
  Millis created_at = 0, updated_at = 0;
};
// Throws Error(data) for an unknown batch.
Status status(store::Store& st, const std::string& batch_no, Millis now);
// Every batch, newest first (of one activity when given); counts are not computed (state and total).
std::vector<Status> list(store::Store& st, const std::optional<std::string>& activity);

struct Item {
  int64_t id = 0, line = 0;
  std::string user;
  ListItemState state = ListItemState::pending;
  std::optional<std::string> record_code, reason, error;
  Millis updated_at = 0;
};
// Items in file order, of one state when given, at most limit. Throws Error(data) for an unknown
// batch, Error(usage) for an unknown state.
std::vector<Item> items(store::Store& st, const std::string& batch_no, const std::optional<std::string>& state,
                        int64_t limit);

// The most items in one chunk: a chunk's items are recorded in one statement with 4 parameters
// each, and PostgreSQL binds at most 65,535 parameters.
inline constexpr int64_t kMostChunk = 10'000;

struct RunOptions {
  std::string batch_no;
  int workers = 1;                // threads in this process, each on its own connection
  double rate_per_s = 0;          // items per second for this process, 0 = as fast as possible
  int64_t chunk = 500;            // items per transaction
  bool dry_run = false;           // every item through the flow in one transaction, rolled back
  std::string operator_name;
  ProgressMode progress = ProgressMode::none;
  // A new connection for each worker (the first worker uses the store passed to run()).
  std::function<std::unique_ptr<store::Store>()> open_store;
  engine::EngineOptions engine;
  // The job runner's run (null when called without the runner, as the benchmark does): before each
  // chunk the workers ask it whether to go on (signal, --max-runtime) and how many items --limit
  // still allows; the caller adds this run's counts to it afterwards.
  JobRun* job = nullptr;
};

struct RunResult {
  std::string batch_no, state;
  int64_t issued = 0, rejected = 0, failed = 0;  // by this run
  int64_t held = 0;                              // by this run: held by a fuse (pending grants)
  std::map<std::string, int64_t> reasons;        // rejected items by reason code, this run
  int64_t total = 0, pending = 0;                // the batch afterwards
  double seconds = 0;
  bool dry_run = false;
  bool interrupted = false;  // SIGINT/SIGTERM: the current chunks finished, the batch is resumable
  bool cancelled = false;    // the batch was cancelled while running
  bool stopped = false;      // --limit or --max-runtime ended the run with items still pending
};

// Runs (or resumes) an approved batch until no item is pending. Refuses with Error(no_perm) a batch
// that is not approved/running or whose approval does not match the batch, and with Error(data),
// naming both hashes, a batch whose activity definition changed since it was planned.
// Chunks of `chunk` items are claimed, issued and recorded in one transaction each (PostgreSQL:
// FOR UPDATE SKIP LOCKED, so processes on several hosts share one batch). Grants whose channel is
// outside the database are delivered after their chunk commits.
RunResult run(store::Store& st, const RunOptions& o, const Clock& clock);

}  // namespace rc::jobs::list_issue
