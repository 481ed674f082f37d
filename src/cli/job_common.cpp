#include "cli/job_common.hpp"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>

namespace rc::cli {

void add_job_options(CLI::App* c, JobFlags& f) {
  c->add_flag("--dry-run", f.dry_run, "Do the work and report the counts, then roll back every chunk; no lease, no job_run row");
  c->add_option("--limit", f.limit, "At most N items this run")->check(CLI::Range(int64_t(1), int64_t(1) << 50));
  c->add_option("--max-runtime", f.max_runtime,
                "Stop between chunks once this long has passed (90s, 10m, 1h30m); the rest waits for the next run");
  c->add_option("--metrics-textfile", f.metrics_textfile,
                "Update this Prometheus textfile (node_exporter textfile collector) atomically after the run");
}

JobSettings job_settings(const Ctx& ctx) {
  JobSettings js;
  const std::string& path = ctx.settings.config_path;
  if (auto* t = ctx.settings.file["jobs"].as_table()) {
    auto where = [&](const toml::source_region& r) {
      return path + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
    };
    for (auto&& [k, v] : *t) {
      const std::string key(k.str());
      if (key == "paused") {
        if (!v.is_boolean()) throw Error(Errc::config, where(v.source()) + ": 'jobs.paused' must be true or false");
        js.paused = *v.value<bool>();
      } else if (key == "stop_file") {
        if (!v.is_string()) throw Error(Errc::config, where(v.source()) + ": 'jobs.stop_file' must be a string");
        js.stop_file = *v.value<std::string>();
      } else {
        throw Error(Errc::config, where(k.source()) + ": unknown setting 'jobs." + key + "' (known: paused, stop_file)");
      }
    }
  }
  if (const char* e = std::getenv("REWARDCTL_JOBS_PAUSED"); e && *e) {
    std::string v = e;
    if (v == "1" || v == "true" || v == "yes" || v == "on") js.paused = true, js.paused_by = "REWARDCTL_JOBS_PAUSED=" + v + " in the environment";
    else if (v == "0" || v == "false" || v == "no" || v == "off") js.paused = false;
    else throw Error(Errc::config, "REWARDCTL_JOBS_PAUSED must be true or false, not '" + v + "'");
  }
  return js;
}

Exit run_job_command(Ctx& ctx, const std::string& job, const JobFlags& f, const jobs::JobFn& fn,
                     const JobPrinter& print, const std::optional<std::string>& lease_key) {
  const auto& decl = jobs::job_decl(job);
  jobs::RunOptions o;
  o.lease_key = lease_key;
  o.dry_run = f.dry_run;
  if (f.limit > 0) o.limit = f.limit;
  if (!f.max_runtime.empty()) o.max_runtime_ms = jobs::parse_duration_ms(f.max_runtime, "--max-runtime");
  o.metrics_textfile = f.metrics_textfile;
  o.operator_name = ctx.settings.operator_name;
  auto js = job_settings(ctx);
  o.paused = js.paused;
  o.paused_by = js.paused_by;
  o.stop_file = js.stop_file;
  o.store_options = ctx.store_options();
  o.lease_ttl_ms = ctx.settings.db_lease_ttl_ms;
  if (auto why = jobs::pause_reason(o); !why.empty()) {
    // paused: not even the database is opened (run_job would say the same)
    spdlog::info("job {} paused ({}): nothing done", job, why);
    if (ctx.out.json_mode()) ctx.out.record({{"job", job}, {"state", "paused"}, {"reason", why}});
    else ctx.out.text("paused: " + why);
    return Exit::ok;
  }
  auto dsn = store::parse_dsn(ctx.settings.db_url, ctx.settings.db_url_source);
  auto st = ctx.open_store();
  if (decl.clock_sensitive && !f.dry_run) ctx.require_clocks_agree("job " + job);
  auto rep = jobs::run_job(decl, fn, *st, dsn, *ctx.clock, o);
  if (print) {
    print(rep);
    return rep.exit;
  }
  json counts = json::object();
  for (auto& [k, v] : rep.counts) counts[k] = v;
  json j{{"job", rep.job},
         {"run_id", rep.run_id ? json(rep.run_id) : json(nullptr)},
         {"state", rep.state},
         {"dry_run", rep.dry_run},
         {"counts", counts},
         {"stopped", rep.stopped.empty() ? json(nullptr) : json(rep.stopped)},
         {"seconds", std::round(rep.seconds * 1000) / 1000}};
  if (ctx.out.json_mode()) {
    ctx.out.record(j);
  } else {
    std::vector<json> rows;
    for (auto& [k, v] : rep.counts) rows.push_back({{"outcome", k}, {"items", v}});
    ctx.out.rows({{"outcome", "OUTCOME"}, {"items", "ITEMS"}}, rows);
    ctx.out.text(job + (rep.run_id ? " run " + std::to_string(rep.run_id) : std::string()) + ": " + rep.state +
                 (rep.stopped.empty() ? "" : " (stopped: " + rep.stopped + ")"));
  }
  return rep.exit;
}

}  // namespace rc::cli
