// reconcile [--activity A] [--checks a,b] [--csv FILE] | reconcile show RUN | reconcile list
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "cli/job_common.hpp"
#include "core/delivery/channel.hpp"
#include "jobs/runtime/alert.hpp"
#include "jobs/reconcile/reconcile.hpp"

namespace rc::cli {
namespace {

namespace rec = jobs::reconcile;

struct {
  std::string activity, csv, stuck_after = "1h", held_after = "24h";
  std::vector<std::string> checks;
  int64_t run_id = 0, limit = 20;
  bool exact = false;
  JobFlags job;
} reconcile_opt;

// RFC 4180: every field quoted, quotes doubled.
std::string csv_field(const std::string& s) {
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

void write_csv(const std::string& path, int64_t run_id, const std::vector<rec::Diff>& diffs) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(Errc::output_failed, "--csv: cannot write " + path + ": " + std::strerror(errno));
  f << "run,check,entity,key,expected,actual,detail\r\n";
  for (auto& d : diffs)
    f << run_id << ',' << csv_field(d.check) << ',' << csv_field(d.entity) << ',' << csv_field(d.key) << ','
      << csv_field(d.expected) << ',' << csv_field(d.actual) << ',' << csv_field(d.detail) << "\r\n";
  f.flush();
  if (!f) throw Error(Errc::output_failed, "--csv: cannot write " + path);
}

void print_diffs(Ctx& ctx, int64_t run_id, const std::vector<rec::Diff>& diffs) {
  std::vector<json> rows;
  for (auto& d : diffs)
    rows.push_back({{"run", run_id}, {"check", d.check}, {"entity", d.entity}, {"key", d.key},
                    {"expected", d.expected}, {"actual", d.actual}, {"detail", d.detail}});
  if (!rows.empty() || ctx.out.json_mode())
    ctx.out.rows({{"check", "CHECK"}, {"entity", "ENTITY"}, {"key", "KEY"}, {"expected", "EXPECTED"},
                  {"actual", "ACTUAL"}, {"detail", "DETAIL"}},
                 rows, "diff");
}

Exit run_reconcile(Ctx& ctx) {
  rec::Options o;
  if (!reconcile_opt.activity.empty()) o.activity = reconcile_opt.activity;
  o.checks = rec::resolve_checks(reconcile_opt.checks);
  o.stuck_after_ms = jobs::parse_duration_ms(reconcile_opt.stuck_after, "--stuck-after");
  o.held_after_ms = jobs::parse_duration_ms(reconcile_opt.held_after, "--held-after");
  o.operator_name = ctx.settings.operator_name;
  o.dry_run = reconcile_opt.job.dry_run;
  o.exact = reconcile_opt.exact;
  o.ledger_channels.clear();
  o.outbox_channels.clear();
  for (auto& [name, cfg] : delivery::parse_channels(ctx.settings)) {
    if (cfg.type == "ledger") o.ledger_channels.push_back(name);
    if (cfg.type == "outbox") o.outbox_channels.push_back(name);
  }
  const auto alerts = jobs::parse_alerts(ctx.settings);  // a bad [alerts] table fails before any work
  // On the job runner: the lease (one reconcile at a time, never during expire), job_run, the pause
  // switch, --metrics-textfile; each check is an item towards --limit, and --max-runtime or a signal
  // skips the checks not yet started (the run is stored as incomplete).
  std::optional<rec::Report> done;
  std::unique_ptr<store::Store> standby;
  const Exit job_exit = run_job_command(ctx, "reconcile", reconcile_opt.job, [&](jobs::JobRun& run) {
    // the checks read a hot standby's snapshot when db.read_url names one; the run is recorded here
    if (!ctx.settings.db_read_url.empty()) {
      standby = ctx.open_read_store();
      o.snapshot_store = standby.get();
    }
    o.more = [&run] {
      if (!run.more()) return false;
      run.add("checks", 1, 1);
      return true;
    };
    done = rec::run(run.store(), o, run.clock());
    run.add("diffs", int64_t(done->diffs.size()));
    run.add("skipped_checks", int64_t(done->skipped.size()));
    if (!done->diffs.empty()) run.set_exit(Exit::findings);
  });
  if (!done) return job_exit;  // paused
  const rec::Report& rep = *done;
  print_diffs(ctx, rep.run_id, rep.diffs);
  if (!reconcile_opt.csv.empty()) write_csv(reconcile_opt.csv, rep.run_id, rep.diffs);
  std::string scope;
  for (auto& c : rep.checks) scope += (scope.empty() ? "" : ",") + c;
  ctx.out.record({{"type", "run"}, {"run", rep.run_id}, {"checks", scope},
                  {"activity", rep.activity ? json(*rep.activity) : json(nullptr)},
                  {"diffs", int64_t(rep.diffs.size())},
                  {"state", !rep.diffs.empty() ? "diffs" : rep.skipped.empty() ? "clean" : "incomplete"},
                  {"skipped", rep.skipped}, {"fingerprinted", rep.fingerprinted},
                  {"dry_run", rep.dry_run}, {"seconds", double(int64_t(rep.seconds * 1000)) / 1000}});
  if (!rep.diffs.empty()) {
    // A summary to [alerts] webhook when one is configured: the counts per check and the first diffs.
    if (alerts) {
      json per_check = json::object(), first = json::array();
      for (auto& d : rep.diffs) {
        per_check[d.check] = per_check.value(d.check, 0) + 1;
        if (first.size() < 20)
          first.push_back({{"check", d.check}, {"entity", d.entity}, {"key", d.key}, {"expected", d.expected},
                           {"actual", d.actual}});
      }
      jobs::post_alert(*alerts, [](const char* n) { return std::getenv(n); },
                       {{"event", "reconcile"}, {"run", rep.run_id}, {"checks", scope},
                        {"activity", rep.activity ? json(*rep.activity) : json(nullptr)},
                        {"diffs", int64_t(rep.diffs.size())}, {"per_check", per_check}, {"first", first},
                        {"dry_run", rep.dry_run}});
    }
  }
  const std::string run_name = rep.run_id ? "run " + std::to_string(rep.run_id) : std::string("dry run");
  std::string skipped;
  for (auto& c : rep.skipped) skipped += (skipped.empty() ? "" : ",") + c;
  std::string proven;
  for (auto& c : rep.fingerprinted) proven += (proven.empty() ? "" : ",") + c;
  if (!proven.empty()) spdlog::info("reconcile {}: proven by fingerprints: {} (--exact runs their full queries)", run_name, proven);
  if (rep.clean()) spdlog::info("reconcile {}: clean ({}) in {:.2f} s", run_name, scope, rep.seconds);
  else if (rep.diffs.empty())
    spdlog::warn("reconcile {}: incomplete, no difference in the checks run; not run: {}", run_name, skipped);
  else
    spdlog::error("reconcile {}: {} difference(s) ({}) in {:.2f} s{}", run_name, rep.diffs.size(), scope, rep.seconds,
                  skipped.empty() ? "" : "; not run: " + skipped);
  return job_exit;
}

json summary_json(const rec::RunSummary& r) {
  return {{"run", r.id},
          {"checks", r.checks},
          {"state", r.state},
          {"diffs", r.diff_count},
          {"operator", r.operator_name},
          {"started_at", format_utc(r.started_at)},
          {"finished_at", r.finished_at ? json(format_utc(*r.finished_at)) : json(nullptr)}};
}

}  // namespace

void register_reconcile(CLI::App& app, Ctx& ctx) {
  auto* rc = app.add_subcommand("reconcile", "Job: check that every cent and unit is accounted for; exit 1 on any difference");
  rc->require_subcommand(0, 1);
  rc->add_option("--activity", reconcile_opt.activity, "Only this activity (and the ledger accounts of its users)");
  rc->add_option("--checks", reconcile_opt.checks, "Comma-separated: stock,budget,ledger,amounts,delivery,qualifications,limits,stuck,status_log,list_items,identifiers")
      ->delimiter(',');
  rc->add_option("--stuck-after", reconcile_opt.stuck_after, "A delivery without outcome this old is stuck (default 1h)");
  rc->add_option("--held-after", reconcile_opt.held_after, "A request held by a fuse this long is stuck (default 24h)");
  rc->add_option("--csv", reconcile_opt.csv, "Also write the differences to FILE as CSV");
  rc->add_flag("--exact", reconcile_opt.exact,
               "PostgreSQL: run every check's full queries, even when its fingerprints (hash sums of both sides) agree");
  add_job_options(rc, reconcile_opt.job);
  rc->callback([&ctx, rc] {
    if (rc->get_subcommands().empty()) ctx.action = [&ctx] { return run_reconcile(ctx); };
  });

  auto* show = rc->add_subcommand("show", "A stored run and its differences");
  show->add_option("RUN", reconcile_opt.run_id, "Run id")->required();
  show->add_option("--csv", reconcile_opt.csv, "Also write the differences to FILE as CSV");
  show->callback([&ctx] {
    ctx.action = [&ctx] {
      auto st = ctx.open_store();
      auto r = rec::show_run(st->autocommit(), reconcile_opt.run_id);
      if (!r) throw Error(Errc::not_found, "no reconcile run " + std::to_string(reconcile_opt.run_id));
      print_diffs(ctx, r->first.id, r->second);
      if (!reconcile_opt.csv.empty()) write_csv(reconcile_opt.csv, r->first.id, r->second);
      auto j = summary_json(r->first);
      j["type"] = "run";
      ctx.out.record(j);
      return r->first.state == "clean" ? Exit::ok : Exit::findings;
    };
  });

  auto* list = rc->add_subcommand("list", "The latest runs, newest first");
  list->add_option("--limit", reconcile_opt.limit, "How many (default 20)")->check(CLI::Range(int64_t(1), int64_t(100000)));
  list->callback([&ctx] {
    ctx.action = [&ctx] {
      auto st = ctx.open_store();
      std::vector<json> rows;
      for (auto& r : rec::list_runs(st->autocommit(), reconcile_opt.limit)) rows.push_back(summary_json(r));
      ctx.out.rows({{"run", "RUN"}, {"state", "STATE"}, {"diffs", "DIFFS"}, {"checks", "CHECKS"},
                    {"operator", "OPERATOR"}, {"started_at", "STARTED"}, {"finished_at", "FINISHED"}},
                   rows, "run");
      return Exit::ok;
    };
  });
}

}  // namespace rc::cli
