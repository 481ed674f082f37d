#pragma once
// What every job command shares on the command line: --dry-run, --limit, --max-runtime,
// --metrics-textfile, the [jobs] settings (pause switch), and how a run's report is printed.
#include <functional>
#include <optional>
#include <string>

#include "cli/context.hpp"
#include "jobs/runtime/runner.hpp"

namespace rc::cli {

struct JobFlags {
  bool dry_run = false;
  int64_t limit = 0;  // 0 = no limit
  std::string max_runtime, metrics_textfile;
};

// Adds the runner's options to a job command.
void add_job_options(CLI::App* c, JobFlags& f);

// [jobs] in the config file: paused (bool), stop_file (string); REWARDCTL_JOBS_PAUSED overrides
// paused. Throws Error(config) naming file:line:column for an unknown key or a wrong type.
struct JobSettings {
  bool paused = false;
  std::string paused_by = "jobs.paused = true in the config";
  std::string stop_file;
};
JobSettings job_settings(const Ctx& ctx);

// Runs the job through the runner with the flags and settings, prints its report (table or json;
// `print`, when given, prints instead: a job with a result of its own), and returns the exit code
// (0, 130 interrupted, or the job's own). A held lease throws Error(75). `lease_key` names the
// lease when it is not the job's name.
using JobPrinter = std::function<void(const jobs::JobReport&)>;
Exit run_job_command(Ctx& ctx, const std::string& job, const JobFlags& f, const jobs::JobFn& fn,
                     const JobPrinter& print = {}, const std::optional<std::string>& lease_key = std::nullopt);

}  // namespace rc::cli
