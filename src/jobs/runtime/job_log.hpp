#pragma once
// The record the runner keeps of its jobs, read back: job_run (one row per run, written at start
// and at end) and job_lock (who took each lease, kept only to name the holder). These rows are a
// record for people (`jobs history`, `jobs locks`, the message of a second run), never what keeps
// two runs apart: the lease itself does that (jobs/runtime/lease.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::jobs {

// One job_run row.
struct JobRunRecord {
  int64_t id = 0;
  std::string job, state, holder;
  std::optional<std::string> counts;   // JSON object of items per outcome; none while running
  std::optional<std::string> error;
  Millis started_at = 0;
  std::optional<Millis> finished_at;   // none while running (or when the run died)
  std::optional<std::string> host;
  std::optional<int64_t> pid, exit_code;
  std::optional<std::string> stopped;  // why it stopped early: signal, limit, max_runtime
};

// The newest `limit` runs, of `job` only unless it is empty, newest first.
std::vector<JobRunRecord> job_history(store::Store& st, const std::string& job, int64_t limit);

// Marks `abandoned` the runs recorded `running` whose process is known to be gone, so that no run
// stays "running" forever after a kill -9 or a full disk (docs/design.md §6.1):
//   - `lease_gone`: the runs whose lease the caller has just taken over (a lease that could be taken
//     is no longer held: its run is over, whatever its row says);
//   - the runs of this host (host_name()) whose process id no longer exists, of `job` only unless
//     it is empty (a pid reused by another process counts as alive: such a run stays running until
//     the next check finds it gone).
// The row gets finished_at = now and an error naming when and by whom it was found ("found
// abandoned by FINDER: REASON"). Returns how many runs were marked. REQUIRES: inside a write
// transaction.
int64_t mark_abandoned(store::Tx& tx, const std::vector<int64_t>& lease_gone, const std::string& job,
                       const std::string& finder, Millis now);

// One job_lock row: who last took the lease `name`.
struct JobLockRecord {
  std::string name, holder;
  std::optional<std::string> job, host;
  std::optional<int64_t> pid, run_id;
  Millis acquired_at = 0;
};

// Every job_lock row, by name.
std::vector<JobLockRecord> job_locks(store::Store& st);
// The job_lock row of lease `name`; none when no run has recorded taking it.
std::optional<JobLockRecord> job_lock(store::Store& st, const std::string& name);

}  // namespace rc::jobs
