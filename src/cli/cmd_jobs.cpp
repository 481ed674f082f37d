// expire | jobs history | jobs locks
#include <CLI/CLI.hpp>

#include "cli/job_common.hpp"
#include "jobs/expire.hpp"
#include "jobs/lease.hpp"

namespace rc::cli {
namespace {

struct {
  JobFlags job;
  int64_t chunk = 500;
  std::string history_job;
  int64_t history_limit = 20;
} opt;

Exit run_history(Ctx& ctx) {
  if (!opt.history_job.empty()) jobs::job_decl(opt.history_job);  // an unknown name is a usage error
  auto st = ctx.open_store();
  auto r = st->query(
      "SELECT id, job, state, counts, error, started_at, finished_at, host, pid, exit_code, stopped, holder "
      "FROM job_run WHERE ($1 = '' OR job = $1) ORDER BY id DESC LIMIT $2",
      {opt.history_job, opt.history_limit});
  std::vector<json> rows;
  for (auto& x : r.rows) {
    json counts = x.is_null(3) ? json::object() : json::parse(x.str(3), nullptr, false);
    double secs = x.is_null(6) ? 0 : double(x.i64(6) - x.i64(5)) / 1000.0;
    rows.push_back({{"run_id", x.i64(0)},
                    {"job", x.str(1)},
                    {"state", x.str(2)},
                    {"counts", counts},
                    {"error", x.is_null(4) ? json(nullptr) : json(x.str(4))},
                    {"started_at", format_utc(x.i64(5))},
                    {"finished_at", x.is_null(6) ? json(nullptr) : json(format_utc(x.i64(6)))},
                    {"seconds", x.is_null(6) ? json(nullptr) : json(secs)},
                    {"host", x.str_or(7, "")},
                    {"pid", x.is_null(8) ? json(nullptr) : json(x.i64(8))},
                    {"exit_code", x.is_null(9) ? json(nullptr) : json(x.i64(9))},
                    {"stopped", x.is_null(10) ? json(nullptr) : json(x.str(10))},
                    {"holder", x.str(11)}});
  }
  ctx.out.rows({{"run_id", "RUN"}, {"job", "JOB"}, {"state", "STATE"}, {"started_at", "STARTED"}, {"seconds", "SECONDS"},
                {"counts", "COUNTS"}, {"exit_code", "EXIT"}, {"host", "HOST"}, {"error", "ERROR"}},
               rows, "job_run");
  return Exit::ok;
}

Exit run_locks(Ctx& ctx) {
  auto dsn = store::parse_dsn(ctx.settings.db_url, ctx.settings.db_url_source);
  auto st = ctx.open_store();
  auto r = st->query("SELECT name, job, host, pid, holder, acquired_at, run_id FROM job_lock ORDER BY name");
  std::vector<json> rows;
  for (auto& x : r.rows) {
    // a row whose lease nobody holds was left by a run that died: the next run replaces it
    bool held = jobs::lease_held(dsn, x.str(0));
    rows.push_back({{"lock", x.str(0)},
                    {"job", x.str_or(1, "")},
                    {"host", x.str_or(2, "")},
                    {"pid", x.is_null(3) ? json(nullptr) : json(x.i64(3))},
                    {"holder", x.str(4)},
                    {"since", format_utc(x.i64(5))},
                    {"run_id", x.is_null(6) ? json(nullptr) : json(x.i64(6))},
                    {"held", held}});
  }
  ctx.out.rows({{"lock", "LOCK"}, {"job", "JOB"}, {"run_id", "RUN"}, {"host", "HOST"}, {"pid", "PID"},
                {"since", "SINCE"}, {"held", "HELD"}},
               rows, "job_lock");
  return Exit::ok;
}

}  // namespace

void register_jobs(CLI::App& app, Ctx& ctx) {
  auto* ex = app.add_subcommand("expire",
                                "Job: end activities past their window (with a settlement), expire qualifications and "
                                "held grants past expires_at");
  add_job_options(ex, opt.job);
  ex->add_option("--chunk-size", opt.chunk, "Rows per transaction (default 500)")->check(CLI::Range(1, 10000));
  ex->callback([&ctx] {
    ctx.action = [&ctx] {
      jobs::ExpireOptions eo;
      eo.chunk = opt.chunk;
      return run_job_command(ctx, "expire", opt.job, [eo](jobs::JobRun& run) { jobs::expire(run, eo); });
    };
  });

  auto* jg = app.add_subcommand("jobs", "Job runs and leases: history, locks")->require_subcommand(1);
  auto* hist = jg->add_subcommand("history", "Recent job runs, newest first, with counts per outcome");
  hist->add_option("--job", opt.history_job, "Only this job");
  hist->add_option("--limit", opt.history_limit, "At most N runs (default 20)")->check(CLI::Range(1, 100000));
  hist->callback([&ctx] { ctx.action = [&ctx] { return run_history(ctx); }; });
  auto* locks = jg->add_subcommand("locks", "Leases recorded in job_lock and whether a live process holds each");
  locks->callback([&ctx] { ctx.action = [&ctx] { return run_locks(ctx); }; });
}

}  // namespace rc::cli
