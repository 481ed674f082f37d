// import-qualifications | qualification revoke | qualification show | qualification count
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cmath>

#include "cli/context.hpp"
#include "core/states.hpp"
#include "cli/time_flag.hpp"
#include "cli/job_common.hpp"
#include "core/identifier.hpp"
#include "jobs/import/import_qualifications.hpp"

namespace rc::cli {
namespace {

struct {
  std::string activity, file, source, rejects, max_rejects = "0", progress = "auto", reason, user, status, expires_at;
  std::string metrics_textfile;
  int64_t batch_size = 0;
  bool dry_run = false, yes = false;
} import_opt;

CLI::Option* expires_opt = nullptr;  // --expires-at: given at all (an empty value is an error)

int64_t per_second(int64_t n, double s) { return s > 0 ? int64_t(std::llround(double(n) / s)) : n; }
std::string rows(int64_t n) { return std::to_string(n) + (n == 1 ? " row" : " rows"); }

// The options import and revoke share: the same CSV file handling, limits, batching and progress.
template <class Options>
Options file_job(Ctx& ctx) {
  Options o;
  o.activity = import_opt.activity;
  o.file = import_opt.file;
  o.rejects_path = import_opt.rejects;
  o.max_rejects = jobs::import::RejectLimit::parse(import_opt.max_rejects);
  o.batch_size = import_opt.batch_size;
  o.dry_run = import_opt.dry_run;
  o.operator_name = ctx.settings.operator_name;
  o.progress = jobs::progress_mode(import_opt.progress, ctx.settings.quiet);
  return o;
}

// The options of an import, checked before anything runs (a usage error writes nothing, not even a
// job_run row).
jobs::ImportOptions import_options(Ctx& ctx) {
  auto o = file_job<jobs::ImportOptions>(ctx);
  o.source = import_opt.source;
  if (expires_opt && expires_opt->count() > 0) {
    o.expires_at = time_flag(import_opt.expires_at, "--expires-at", "2026-12-31T23:59:59+08:00");
    if (*o.expires_at <= ctx.now())
      throw Error(Errc::usage, "--expires-at " + format_utc(*o.expires_at) + " is not in the future (now " +
                                   format_utc(ctx.now()) + "): nothing was imported");
  }
  return o;
}

Exit import_body(Ctx& ctx, const jobs::ImportOptions& o, jobs::JobRun& run) {
  auto r = jobs::import_qualifications(run.store(), o, run.clock());
  const auto& c = r.counts;
  // this run's work (a resumed import's totals include what the earlier run committed)
  for (auto [k, v] : {std::pair{"inserted", c.inserted - r.resumed.inserted}, {"existing", c.existing - r.resumed.existing},
                      {"rejected", c.rejected - r.resumed.rejected}})
    run.add(k, v, v);
  spdlog::info("{}import into {} from {}: read {}, inserted {}, existing {}, rejected {} in {:.2f} s ({} rows/s){}",
               r.dry_run ? "dry run: " : "", r.activity, r.file, c.read, c.inserted, c.existing, c.rejected, r.seconds,
               per_second(c.read, r.seconds),
               r.resumed_from ? " (resumed after row " + std::to_string(r.resumed_from) + ")" : std::string());
  // the result on stdout, as a table or JSON, even with --quiet: the command did work
  ctx.out.record({{"activity", r.activity},
                  {"file", r.file},
                  {"import_id", r.import_id},
                  {"sha256", r.sha256},
                  {"dry_run", r.dry_run},
                  {"read", c.read},
                  {"inserted", c.inserted},
                  {"existing", c.existing},
                  {"rejected", c.rejected},
                  {"resumed_from", r.resumed_from},
                  {"seconds", std::round(r.seconds * 1000) / 1000},
                  {"rows_per_s", per_second(c.read, r.seconds)},
                  {"rejects_file", r.rejects_path.empty() ? json(nullptr) : json(r.rejects_path)},
                  {"over_limit", r.over_limit},
                  {"interrupted", r.interrupted}});
  const std::string see = r.rejects_path.empty() ? "" : " (see " + r.rejects_path + ")";
  if (r.over_limit)
    throw Error(Errc::bad_input, r.file + ": " + rows(c.rejected) + " rejected, over --max-rejects " +
                                     r.limit + see +
                                     (import_opt.batch_size > 0 ? ": the last batch was rolled back; batches committed before it "
                                                           "stay, and a rerun continues after them"
                                                         : ": nothing was imported"));
  if (c.rejected > 0) spdlog::warn("{} rejected, within --max-rejects {}{}", rows(c.rejected), r.limit, see);
  return r.exit_code();
}

Exit revoke_body(Ctx& ctx, const jobs::RevokeOptions& o, jobs::JobRun& run) {
  auto r = jobs::revoke_qualifications(run.store(), o, run.clock());
  for (auto [k, v] : {std::pair{"revoked", r.revoked}, {"not_found", r.not_found}, {"not_unused", r.not_unused},
                      {"rejected", r.rejected}})
    run.add(k, v, v);
  spdlog::info("{}revoke in {} from {}: read {}, revoked {}, not found {}, not unused {}, rejected {} in {:.2f} s",
               r.dry_run ? "dry run: " : "", r.activity, r.file, r.read, r.revoked, r.not_found, r.not_unused,
               r.rejected, r.seconds);
  // the result on stdout, as a table or JSON, even with --quiet: the command did work
  ctx.out.record({{"activity", r.activity},
                  {"file", r.file},
                  {"dry_run", r.dry_run},
                  {"read", r.read},
                  {"revoked", r.revoked},
                  {"not_found", r.not_found},
                  {"not_unused", r.not_unused},
                  {"rejected", r.rejected},
                  {"seconds", std::round(r.seconds * 1000) / 1000},
                  {"rejects_file", r.rejects_path.empty() ? json(nullptr) : json(r.rejects_path)},
                  {"over_limit", r.over_limit},
                  {"interrupted", r.interrupted}});
  const std::string see = r.rejects_path.empty() ? "" : " (see " + r.rejects_path + ")";
  if (r.over_limit)
    throw Error(Errc::bad_input, r.file + ": " + rows(r.rejected) + " rejected, over --max-rejects " +
                                     r.limit + see + ": nothing was revoked" +
                                     (import_opt.batch_size > 0 ? " by the last batch" : ""));
  if (r.rejected > 0) spdlog::warn("{} rejected, within --max-rejects {}{}", rows(r.rejected), r.limit, see);
  return r.exit_code();
}

// Import and revoke are jobs of the runner: the pause switch, a job_run row, SIGTERM recorded as
// interrupted (exit 130), --metrics-textfile. The body prints its own summary; an over-limit file
// throws after it, and the runner records the run as failed with that message.
template <class Options>
Exit as_job(Ctx& ctx, const std::string& job, const Options& o, Exit (*body)(Ctx&, const Options&, jobs::JobRun&)) {
  JobFlags f;
  f.dry_run = import_opt.dry_run;
  f.metrics_textfile = import_opt.metrics_textfile;
  return run_job_command(
      ctx, job, f, [&ctx, &o, body](jobs::JobRun& run) { run.set_exit(body(ctx, o, run)); },
      [&job](const jobs::JobReport& rep) {
        if (rep.state == "interrupted")
          spdlog::warn("{} interrupted: batches committed before the signal stay; the same command continues", job);
      });
}

Exit run_import(Ctx& ctx) { return as_job(ctx, "import-qualifications", import_options(ctx), import_body); }
Exit run_revoke(Ctx& ctx) {
  check_text(import_opt.reason, "--reason", kMaxReasonBytes, false);
  confirm_irreversible(import_opt.yes || import_opt.dry_run, "qualification revoke",
                       "Revoke the unused qualifications in " + import_opt.activity + " of the users " + import_opt.file +
                           " lists? This cannot be undone.");
  auto o = file_job<jobs::RevokeOptions>(ctx);
  o.reason = import_opt.reason;
  return as_job(ctx, "qualification-revoke", o, revoke_body);
}

Exit run_show(Ctx& ctx) {
  import_opt.user = require_identifier(import_opt.user, IdKind::user, "USER");
  auto store = ctx.open_store();
  auto q = jobs::find_qualification(*store, import_opt.activity, import_opt.user);
  if (!q) throw Error(Errc::not_found, "user '" + import_opt.user + "' has no qualification in " + import_opt.activity);
  auto opt_json = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  json ext = nullptr;
  if (q->ext) ext = json::parse(*q->ext, nullptr, false);
  ctx.out.record({{"activity", import_opt.activity},
                  {"user_id", q->user_id},
                  {"status", q->status},
                  {"source", opt_json(q->source)},
                  {"import_id", opt_json(q->import_id)},
                  {"import_line", opt_json(q->import_line)},
                  {"ext", ext.is_discarded() ? json(*q->ext) : ext},
                  {"expires_at", q->expires_at ? json(format_utc(*q->expires_at)) : json(nullptr)},
                  {"created_at", format_utc(q->created_at)},
                  {"updated_at", format_utc(q->updated_at)}});
  return Exit::ok;
}

Exit run_count(Ctx& ctx) {
  auto store = ctx.open_store();
  std::optional<std::string> status;
  if (!import_opt.status.empty()) status = import_opt.status;
  int64_t n = jobs::count_qualifications(*store, import_opt.activity, status);
  json j = {{"activity", import_opt.activity}, {"count", n}};
  if (status) j["status"] = *status;
  ctx.out.record(j);
  return Exit::ok;
}

// The options an import and a revoke share.
void file_options(CLI::App* c) {
  c->add_option("ACTIVITY", import_opt.activity, "Activity code")->required();
  c->add_option("FILE", import_opt.file, "CSV file with a user_id column; - reads standard input")->required();
  c->add_option("--rejects", import_opt.rejects, "Rejects file (default FILE.rejects.csv; stdin.rejects.csv for -)");
  c->add_option("--max-rejects", import_opt.max_rejects,
                "Rejected rows allowed, as a count or a percentage of the rows read (N or N%); more fails with "
                "exit 65 and writes nothing (default 0)");
  c->add_option("--batch-size", import_opt.batch_size, "Commit every N rows (default: the whole file in one transaction)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  c->add_flag("--dry-run", import_opt.dry_run, "Do everything, report the counts, and roll back");
  c->add_option("--progress", import_opt.progress, "auto, tty, plain or none (default auto; none with --quiet)")
      ->check(CLI::IsMember({"auto", "tty", "plain", "none"}));
  c->add_option("--metrics-textfile", import_opt.metrics_textfile,
                "Update this Prometheus textfile (node_exporter textfile collector) atomically after the run");
}

}  // namespace

void register_import(CLI::App& app, Ctx& ctx) {
  auto* imp = app.add_subcommand("import-qualifications",
                                 "Import a whitelist CSV into an activity: idempotent, with a rejects file");
  file_options(imp);
  imp->add_option("--source", import_opt.source, "Source recorded on each qualification (default: the file name)");
  expires_opt = imp->add_option("--expires-at", import_opt.expires_at,
                  "When the new qualifications expire (RFC 3339 with an offset; the expire job moves them to expired); "
                  "a row's own expires_at cell wins");
  imp->callback([&ctx] { ctx.action = [&ctx] { return run_import(ctx); }; });

  auto* q = app.add_subcommand("qualification", "Whitelist entries: revoke, show, count")->require_subcommand(1);
  auto* revoke = q->add_subcommand("revoke", "Revoke the unused qualifications of the users a CSV file lists");
  file_options(revoke);
  revoke->add_option("--reason", import_opt.reason, "Reason recorded in the status log");
  revoke->add_flag("-y,--yes", import_opt.yes, "Do not ask for confirmation (needed without a terminal)");
  revoke->callback([&ctx] { ctx.action = [&ctx] { return run_revoke(ctx); }; });
  auto* show = q->add_subcommand("show", "Show one user's qualification");
  show->add_option("ACTIVITY", import_opt.activity, "Activity code")->required();
  show->add_option("USER", import_opt.user, "User id")->required();
  show->callback([&ctx] { ctx.action = [&ctx] { return run_show(ctx); }; });
  auto* count = q->add_subcommand("count", "Count an activity's qualifications");
  count->add_option("ACTIVITY", import_opt.activity, "Activity code")->required();
  count->add_option("--status", import_opt.status, "Only this status")
      ->check(CLI::IsMember(all_names<QualificationStatus>()));
  count->callback([&ctx] { ctx.action = [&ctx] { return run_count(ctx); }; });
}

}  // namespace rc::cli
