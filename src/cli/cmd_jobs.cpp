// expire | jobs history | jobs locks
#include <CLI/CLI.hpp>

#include "cli/job_common.hpp"
#include "jobs/expire/expire.hpp"
#include "jobs/runtime/job_log.hpp"
#include "jobs/runtime/lease.hpp"

namespace rc::cli {
namespace {

struct {
  JobFlags job;
  int64_t chunk = 500;
  std::string history_job;
  int64_t history_limit = 20;
} jobs_opt;

// a nullable column as JSON: null when absent
template <class T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

Exit run_history(Ctx& ctx) {
  if (!jobs_opt.history_job.empty()) jobs::job_decl(jobs_opt.history_job);  // an unknown name is a usage error
  auto st = ctx.open_store();
  // Runs recorded running whose process on this host is gone are marked abandoned first (a
  // read-only database is only read: they are shown as recorded).
  try {
    const std::string finder = "jobs history (" + ctx.settings.operator_name + "@" + jobs::host_name() + ")";
    st->transact(store::TxMode::write, [&](store::Tx& tx) {
      jobs::mark_abandoned(tx, {}, jobs_opt.history_job, finder, ctx.now());
    });
  } catch (const Error& e) {
    spdlog::debug("jobs history: abandoned runs not marked: {}", e.what());
  }
  std::vector<json> rows;
  for (auto& x : jobs::job_history(*st, jobs_opt.history_job, jobs_opt.history_limit)) {
    json counts = x.counts ? json::parse(*x.counts, nullptr, false) : json::object();
    rows.push_back({{"run_id", x.id},
                    {"job", x.job},
                    {"state", x.state},
                    {"counts", counts},
                    {"error", or_null(x.error)},
                    {"started_at", format_utc(x.started_at)},
                    {"finished_at", x.finished_at ? json(format_utc(*x.finished_at)) : json(nullptr)},
                    {"seconds", x.finished_at ? json(double(*x.finished_at - x.started_at) / 1000.0) : json(nullptr)},
                    {"host", x.host.value_or("")},
                    {"pid", or_null(x.pid)},
                    {"exit_code", or_null(x.exit_code)},
                    {"stopped", or_null(x.stopped)},
                    {"holder", x.holder}});
  }
  ctx.out.rows({{"run_id", "RUN"}, {"job", "JOB"}, {"state", "STATE"}, {"started_at", "STARTED"}, {"seconds", "SECONDS"},
                {"counts", "COUNTS"}, {"exit_code", "EXIT"}, {"host", "HOST"}, {"error", "ERROR"}},
               rows, "job_run");
  return Exit::ok;
}

Exit run_locks(Ctx& ctx) {
  auto dsn = store::parse_dsn(ctx.settings.db_url, ctx.settings.db_url_source);
  auto st = ctx.open_store();
  std::vector<json> rows;
  for (auto& x : jobs::job_locks(*st)) {
    // a row whose lease nobody holds was left by a run that died: the next run replaces it
    bool held = jobs::lease_held(dsn, ctx.store_options(), *st, x.name);
    rows.push_back({{"lock", x.name},
                    {"job", x.job.value_or("")},
                    {"host", x.host.value_or("")},
                    {"pid", or_null(x.pid)},
                    {"holder", x.holder},
                    {"since", format_utc(x.acquired_at)},
                    {"run_id", or_null(x.run_id)},
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
  add_job_options(ex, jobs_opt.job);
  ex->add_option("--chunk-size", jobs_opt.chunk, "Rows per transaction (default 500)")->check(CLI::Range(1, 10000));
  ex->callback([&ctx] {
    ctx.action = [&ctx] {
      jobs::ExpireOptions eo;
      eo.chunk = jobs_opt.chunk;
      return run_job_command(ctx, "expire", jobs_opt.job, [eo](jobs::JobRun& run) { jobs::expire(run, eo); });
    };
  });

  auto* jg = app.add_subcommand("jobs", "Job runs and leases: history, locks")->require_subcommand(1);
  auto* hist = jg->add_subcommand("history", "Recent job runs, newest first, with counts per outcome");
  hist->add_option("--job", jobs_opt.history_job, "Only this job");
  hist->add_option("--limit", jobs_opt.history_limit, "At most N runs (default 20)")->check(CLI::Range(1, 100000));
  hist->callback([&ctx] { ctx.action = [&ctx] { return run_history(ctx); }; });
  auto* locks = jg->add_subcommand("locks", "Leases recorded in job_lock and whether a live process holds each");
  locks->callback([&ctx] { ctx.action = [&ctx] { return run_locks(ctx); }; });
}

}  // namespace rc::cli
