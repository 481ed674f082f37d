#pragma once
// Prometheus textfile metrics for node_exporter's textfile collector. One file may serve every job:
// a run replaces only its own job's series and keeps the others', under an flock on PATH.lock, and
// the file is replaced atomically (a temp file in the same directory, fsync, rename), so the
// collector never reads half a file.
//
// Series (gauges, label job="NAME"):
//   rewardctl_job_last_run_timestamp_seconds      end of the last run
//   rewardctl_job_last_success_timestamp_seconds  end of the last run that finished (kept across failures)
//   rewardctl_job_last_duration_seconds
//   rewardctl_job_last_exit_code
//   rewardctl_job_last_items{outcome="..."}       items per outcome in the last run
#include <string>

#include "core/clock.hpp"

namespace rc::jobs {

struct JobReport;

// Throws Error(unavailable) naming the path when the file cannot be written.
void write_metrics(const std::string& path, const JobReport& r, Millis now);

// The lines of `text` that do not belong to job `job` (comments and other jobs' samples); for tests.
std::string metrics_without_job(const std::string& text, const std::string& job);

}  // namespace rc::jobs
