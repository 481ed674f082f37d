#pragma once
// The job runner: the one place where every batch job (expire, resend, fuse-scan, reconcile,
// list-issue) begins and ends, in the spirit of pgBackRest's cmdBegin/cmdEnd. A job is declared as
// data (jobs/runtime/job_table.hpp: name, lock, conflicts); its function only does the work, chunk by
// chunk, through JobRun. The runner, not the job:
//   - honours the pause switch (jobs.paused / jobs.stop_file): "paused", exit 0, nothing touched;
//   - takes the lease of an exclusive job and of the jobs it conflicts with (jobs/runtime/lease.hpp); a
//     second run exits 75 at once naming the holder, having written nothing;
//   - records a job_run row at start and at end (state, counts per outcome, error, exit code);
//   - runs each chunk in its own transaction, rolled back under --dry-run, and between chunks
//     stops for SIGINT/SIGTERM (recorded as interrupted, exit 130), --limit and --max-runtime;
//   - logs one summary line and writes the Prometheus textfile when asked.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "base/error.hpp"
#include "core/store/store.hpp"
#include "jobs/runtime/job_table.hpp"

namespace rc::jobs {

using Counts = std::map<std::string, int64_t>;  // items per outcome ("ended", "expired", "delivered", ...)

struct RunOptions {
  bool dry_run = false;                  // same work and counts, every chunk rolled back, no job_run row
  std::optional<int64_t> limit;          // at most this many items this run
  std::optional<int64_t> max_runtime_ms; // stop between chunks once this long has passed
  std::string metrics_textfile;          // Prometheus textfile to update ("" = none)
  std::string operator_name;             // recorded as the actor of every change
  bool paused = false;                   // jobs.paused = true (or REWARDCTL_JOBS_PAUSED)
  std::string paused_by = "jobs.paused = true in the config";  // where `paused` came from, for the message
  std::string stop_file;                 // jobs.stop_file: its existence pauses every job
  // the lease key when it is not the job's name (a list-issue batch: "list-issue:B...")
  std::optional<std::string> lease_key;
  store::StoreOptions store_options;  // for the lease's own connections (pooled: row leases)
  int64_t lease_ttl_ms = 30000;       // a row lease's life between heartbeats (db.lease_ttl_ms)
};

// What a job's function sees. REQUIRES: used only from the thread that runs the job.
class JobRun {
 public:
  store::Store& store() { return st_; }
  const Clock& clock() const { return clock_; }
  Millis now() const { return clock_.now_ms(); }
  bool dry_run() const { return o_.dry_run; }
  const std::string& actor() const { return o_.operator_name; }
  const std::string& name() const { return decl_.name; }
  int64_t run_id() const { return run_id_; }

  // True while the job may start another chunk: no signal arrived, --limit not reached,
  // --max-runtime not passed. The first reason to stop is remembered for the record.
  bool more();
  // How many items the next chunk may take: min(want, what --limit leaves). REQUIRES more().
  int64_t allowance(int64_t want) const;
  // Runs fn in one write transaction (rolled back under --dry-run; retried from the start on a
  // busy/serialization failure, so fn must only touch its own Counts) and, once committed (or
  // rolled back for the dry run), adds fn's counts to the run's. `items` is how many of those
  // counts are items towards --limit (fn returns it). Returns that number.
  int64_t chunk(const std::function<int64_t(store::Tx&, Counts&)>& fn);
  // Counts work done outside a chunk (a delivery after its claim committed).
  void add(const std::string& outcome, int64_t n = 1, int64_t items = 0);
  // A job-specific result code (fuse-scan: 1 when a rule tripped; reconcile: 1 on diffs).
  void set_exit(Exit e) { exit_ = e; }
  const Counts& counts() const { return counts_; }
  // Sleeps up to ms, waking early for a signal (for rate caps). Returns false when interrupted.
  bool sleep_ms(int64_t ms);

 private:
  friend class Runner;
  JobRun(const JobDecl& d, store::Store& st, const Clock& c, const RunOptions& o)
      : decl_(d), st_(st), clock_(c), o_(o), t0_(std::chrono::steady_clock::now()) {}
  const JobDecl& decl_;
  store::Store& st_;
  const Clock& clock_;
  const RunOptions& o_;
  std::chrono::steady_clock::time_point t0_;
  int64_t run_id_ = 0, items_ = 0;
  Counts counts_;
  std::string stopped_;  // "", limit, max_runtime, signal
  Exit exit_ = Exit::ok;
};

struct JobReport {
  std::string job;
  int64_t run_id = 0;       // 0 for a dry run or a paused one
  std::string state;        // done, interrupted, failed, paused, dry_run
  Counts counts;
  std::string stopped;      // limit, max_runtime, signal, or ""
  std::string error;
  double seconds = 0;
  bool dry_run = false;
  Exit exit = Exit::ok;     // what the command should exit with
};

using JobFn = std::function<void(JobRun&)>;

// Runs one job. Throws Error(temp_fail) naming the holder when the lease is held (nothing written),
// and rethrows a job's Error after recording the run as failed. A signal between chunks ends the
// run as interrupted (report.exit = 130); everything committed before stays.
// `dsn` locates the lease (the SQLite lock file beside the database, or a PostgreSQL session).
JobReport run_job(const JobDecl& decl, const JobFn& fn, store::Store& st, const store::Dsn& dsn, const Clock& clock,
                  const RunOptions& o);

// "30s", "10m", "1h30m", "500ms", "2d" -> milliseconds. Throws Error(usage) naming `flag`.
int64_t parse_duration_ms(const std::string& s, const std::string& flag);

// The pause switch: a reason ("jobs.paused = true in the config", "stop file X exists"), or "".
std::string pause_reason(const RunOptions& o);

}  // namespace rc::jobs
