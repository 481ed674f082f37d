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
