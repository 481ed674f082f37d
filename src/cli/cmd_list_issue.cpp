// list-issue plan | approve | run | status | items | cancel | list
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cmath>

#include "cli/context.hpp"
#include "cli/engine_setup.hpp"
#include "cli/job_common.hpp"
#include "core/states.hpp"
#include "jobs/list_issue/list_issue.hpp"

namespace rc::cli {

namespace {

namespace li = jobs::list_issue;

struct {
  std::string activity, prize, file, rejects, max_rejects = "0", progress = "auto", batch, state, reason;
  bool allow_partial = false, dry_run = false, yes = false;
  int workers = 1;
  double rate = 0;
  int64_t chunk = 500, limit = 100;
  JobFlags job;  // run: --dry-run, --limit, --max-runtime, --metrics-textfile
} list_issue_opt;

json opt_json(const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); }

Exit run_plan(Ctx& ctx) {
  li::PlanOptions o;
  o.activity = list_issue_opt.activity;
  o.prize = list_issue_opt.prize;
  o.file = list_issue_opt.file;
  o.rejects_path = list_issue_opt.rejects;
  o.max_rejects = jobs::import::RejectLimit::parse(list_issue_opt.max_rejects);
  o.allow_partial = list_issue_opt.allow_partial;
  o.dry_run = list_issue_opt.dry_run;
  o.operator_name = ctx.settings.operator_name;
  o.progress = jobs::progress_mode(list_issue_opt.progress, ctx.settings.quiet);
  auto st = ctx.open_store();
  auto r = li::plan(*st, o, *ctx.clock);
  ctx.out.record({{"batch", r.stored ? json(r.batch_no) : json(nullptr)},
                  {"activity", r.activity},
                  {"prize", r.prize},
                  {"file", r.file},
                  {"sha256", r.sha256},
                  {"definition_hash", r.definition_hash},
                  {"read", r.read},
                  {"users", r.users},
                  {"duplicates", r.duplicates},
                  {"rejected", r.rejected},
                  {"unit_cost_cents", r.unit_cost_cents},
                  {"cost_cents", r.cost_cents},
                  {"stock_left", r.stock_left},
                  {"budget_left", r.budget_left ? json(*r.budget_left) : json(nullptr)},
                  {"budget_grants", r.budget_grants ? json(*r.budget_grants) : json(nullptr)},
                  {"fits", r.fits},
                  {"stored", r.stored},
                  {"dry_run", r.dry_run},
                  {"rejects_file", r.rejects_path.empty() ? json(nullptr) : json(r.rejects_path)}});
  const std::string see = r.rejects_path.empty() ? "" : " (see " + r.rejects_path + ")";
  if (r.over_limit)
    throw Error(Errc::bad_input, r.file + ": " + std::to_string(r.rejected) + " rows rejected, over --max-rejects " + r.limit +
                                     see + ": nothing was stored");
  if (!r.fits && !list_issue_opt.allow_partial)
    throw Error(Errc::conflict, "stock (" + std::to_string(r.stock_left) + " left) or budget (" +
                                    (r.budget_left ? std::to_string(*r.budget_left) + " cents left" : std::string("none")) +
                                    (r.budget_grants ? ", room for " + std::to_string(*r.budget_grants) +
                                                           " grants"
                                                     : std::string()) +
                                    ") does not cover " + std::to_string(r.users) + " users costing " +
                                    std::to_string(r.cost_cents) +
                                    " cents: nothing was stored (--allow-partial stores it; the rest is rejected when it runs)");
  if (r.rejected > 0) spdlog::warn("{} rows rejected, within --max-rejects {}{}", r.rejected, r.limit, see);
  if (r.dry_run) spdlog::info("dry run: nothing was stored");
  return r.rejected > 0 ? Exit::partial : Exit::ok;
}

Exit report_change(Ctx& ctx, const li::Change& c) {
  json j{{"batch", c.batch_no}, {"from", c.from}, {"to", c.to}, {"changed", c.changed},
         {"dry_run", c.dry_run}, {"message", c.message}};
  if (c.to == name(ListBatchState::cancelled)) j["items_cancelled"] = c.items;
  ctx.out.record(j);
  if (!c.changed) {
    spdlog::error("{}", c.message);
    return Exit::findings;
  }
  spdlog::info("{}", c.message);
  return Exit::ok;
}

Exit run_approve(Ctx& ctx) {
  auto st = ctx.open_store();
  return report_change(ctx, li::approve(*st, list_issue_opt.batch, ctx.settings.operator_name, ctx.now(), list_issue_opt.dry_run));
}

Exit run_cancel(Ctx& ctx) {
  check_text(list_issue_opt.reason, "--reason", kMaxReasonBytes, false);
  confirm_irreversible(list_issue_opt.yes || list_issue_opt.dry_run, "list-issue cancel",
                       "Cancel batch " + list_issue_opt.batch + "? Its pending users will not get the prize; a cancelled batch "
                       "cannot run again.");
  auto st = ctx.open_store();
  std::optional<std::string> reason;
  if (!list_issue_opt.reason.empty()) reason = list_issue_opt.reason;
  return report_change(ctx, li::cancel(*st, list_issue_opt.batch, ctx.settings.operator_name, reason, ctx.now(), list_issue_opt.dry_run));
}

// run goes through the job runner (pause switch, job_run row, --limit, --max-runtime, SIGTERM,
// metrics). It takes no lease: processes on several hosts share a batch through SKIP LOCKED.
Exit run_run(Ctx& ctx) {
  li::RunOptions o;
  o.batch_no = list_issue_opt.batch;
  o.workers = list_issue_opt.workers;
  o.rate_per_s = list_issue_opt.rate;
  o.chunk = list_issue_opt.chunk;
  o.dry_run = list_issue_opt.job.dry_run;
  o.operator_name = ctx.settings.operator_name;
  o.progress = jobs::progress_mode(list_issue_opt.progress, ctx.settings.quiet);
  o.open_store = [&ctx] { return ctx.open_store(); };
  o.engine = engine_options(ctx);
  li::RunResult r;
  bool ran = false;
  auto fn = [&](jobs::JobRun& run) {
    o.job = &run;
    r = li::run(run.store(), o, run.clock());
    ran = true;
    run.add("issued", r.issued, r.issued);
    run.add("rejected", r.rejected, r.rejected);
    if (r.failed) run.add("failed", r.failed);
    if (r.held) run.add("held", r.held);
    run.more();  // records why the run stopped (limit, max_runtime, signal)
    if (r.cancelled) run.set_exit(Exit::findings);
    else if (r.rejected + r.failed + r.held > 0) run.set_exit(Exit::partial);
  };
  auto print = [&](const jobs::JobReport& rep) {
    if (!ran) {  // paused: the runner did nothing
      ctx.out.record({{"batch", list_issue_opt.batch}, {"state", rep.state}, {"reason", rep.error}});
      return;
    }
    const int64_t n = r.issued + r.rejected + r.held;
    const double per_s = r.seconds > 0 ? std::round(double(n) / r.seconds) : 0;
    json reasons = json::object();
    for (auto& [k, v] : r.reasons) reasons[k] = v;
    ctx.out.record({{"batch", r.batch_no},
                    {"run_id", rep.run_id ? json(rep.run_id) : json(nullptr)},
                    {"state", r.state},
                    {"dry_run", r.dry_run},
                    {"issued", r.issued},
                    {"rejected", r.rejected},
                    {"failed", r.failed},
                    {"held", r.held},
                    {"reasons", reasons},
                    {"pending", r.pending},
                    {"total", r.total},
                    {"seconds", std::round(r.seconds * 1000) / 1000},
                    {"per_s", per_s},
                    {"interrupted", r.interrupted},
                    {"stopped", rep.stopped.empty() ? json(nullptr) : json(rep.stopped)}});
    spdlog::info("{}run {}: issued {}, rejected {}, failed {}, held {} in {:.2f} s ({} /s); batch {}, {} pending",
                 r.dry_run ? "dry run: " : "", r.batch_no, r.issued, r.rejected, r.failed, r.held, r.seconds, per_s,
                 r.state, r.pending);
    if (r.held)
      spdlog::warn("{} item(s) held by a fuse: they follow the fuse's decision (rewardctl fuse list; fuse release "
                   "EVENT --false-alarm or fuse confirm EVENT)",
                   r.held);
    if (r.interrupted)
      spdlog::warn("interrupted: the chunks under way were finished; batch {} is resumable (run it again)", r.batch_no);
    else if (r.stopped)
      spdlog::info("stopped by --{}: batch {} is resumable, {} pending", rep.stopped == "limit" ? "limit" : "max-runtime",
                   r.batch_no, r.pending);
    if (r.cancelled) spdlog::error("batch {} was cancelled while running", r.batch_no);
  };
  return run_job_command(ctx, "list-issue", list_issue_opt.job, fn, print);
}

json status_json(const li::Status& s, bool counts) {
  json j{{"batch", s.batch_no},       {"activity", s.activity},   {"prize", s.prize},
         {"state", s.state},          {"total", s.total},         {"cost_cents", s.cost_cents},
         {"created_by", s.created_by}, {"approved_by", opt_json(s.approved_by)},
         {"file", s.file_name},       {"created_at", format_utc(s.created_at)}};
  if (!counts) return j;
  j.update({{"pending", s.pending},
            {"issued", s.issued},
            {"rejected", s.rejected},
            {"failed", s.failed},
            {"cancelled", s.cancelled},
            {"held", s.held},
            {"rejected_rows", s.rejected_rows},
            {"rate_per_s", std::round(s.rate_per_s * 10) / 10},
            {"eta_s", s.eta_s ? json(*s.eta_s) : json(nullptr)},
            {"last_error", opt_json(s.last_error)},
            {"sha256", s.file_sha256},
            {"definition_hash", s.definition_hash},
            {"updated_at", format_utc(s.updated_at)}});
  return j;
}

Exit run_batch_status(Ctx& ctx) {
  auto st = ctx.open_store();
  ctx.out.record(status_json(li::status(*st, list_issue_opt.batch, ctx.now()), true));
  return Exit::ok;
}

Exit run_items(Ctx& ctx) {
  auto st = ctx.open_store();
  std::optional<std::string> state;
  if (!list_issue_opt.state.empty()) state = list_issue_opt.state;
  std::vector<json> rows;
  for (auto& it : li::items(*st, list_issue_opt.batch, state, list_issue_opt.limit))
    rows.push_back({{"line", it.line},
                    {"user", it.user},
                    {"state", it.state},
                    {"record_code", opt_json(it.record_code)},
                    {"reason", opt_json(it.reason)},
                    {"error", opt_json(it.error)},
                    {"updated_at", format_utc(it.updated_at)}});
  ctx.out.rows({{"line", "LINE"}, {"user", "USER"}, {"state", "STATE"}, {"record_code", "RECORD"},
                {"reason", "REASON"}, {"error", "ERROR"}},
               rows, "list_item");
  return Exit::ok;
}

Exit run_list(Ctx& ctx) {
  auto st = ctx.open_store();
  std::optional<std::string> act;
  if (!list_issue_opt.activity.empty()) act = list_issue_opt.activity;
  std::vector<json> rows;
  for (auto& s : li::list(*st, act)) rows.push_back(status_json(s, false));
  ctx.out.rows({{"batch", "BATCH"}, {"activity", "ACTIVITY"}, {"prize", "PRIZE"}, {"state", "STATE"},
                {"total", "USERS"}, {"cost_cents", "COST"}, {"created_by", "PLANNED BY"},
                {"approved_by", "APPROVED BY"}, {"created_at", "CREATED"}},
               rows, "list_batch");
  return Exit::ok;
}

CLI::App* batch_command(CLI::App* g, const char* name, const char* help) {
  auto* c = g->add_subcommand(name, help);
  c->add_option("BATCH", list_issue_opt.batch, "Batch number (from list-issue plan or list)")->required();
  return c;
}

}  // namespace

void register_list_issue(CLI::App& app, Ctx& ctx) {
  auto* g = app.add_subcommand("list-issue",
                               "Issue one prize to every user of a CSV list: plan, approve (a second operator), run")
                ->require_subcommand(1);
  auto on = [&ctx](CLI::App* c, Exit (*fn)(Ctx&)) {
    c->callback([&ctx, fn] {
      ctx.action = [&ctx, fn] {
        if (!list_issue_opt.batch.empty()) check_text(list_issue_opt.batch, "BATCH", kMaxNameBytes, true);  // PostgreSQL refuses bad bytes
        return fn(ctx);
      };
    });
  };

  auto* plan = g->add_subcommand("plan", "Read, check and dedupe the list; store it as a batch to approve");
  plan->add_option("ACTIVITY", list_issue_opt.activity, "Activity code")->required();
  plan->add_option("FILE", list_issue_opt.file, "CSV file with a user_id column; - reads standard input")->required();
  plan->add_option("--prize", list_issue_opt.prize, "Prize code every user gets")->required();
  plan->add_option("--rejects", list_issue_opt.rejects, "Rejects file (default FILE.rejects.csv; stdin.rejects.csv for -)");
  plan->add_option("--max-rejects", list_issue_opt.max_rejects,
                   "Rejected rows allowed, as a count or a percentage of the rows read (N or N%); more fails with "
                   "exit 65 and stores nothing (default 0)");
  plan->add_flag("--allow-partial", list_issue_opt.allow_partial,
                 "Store the batch even when stock or budget do not cover every user (the rest is rejected when it runs)");
  plan->add_flag("--dry-run", list_issue_opt.dry_run, "Check and count everything, store nothing");
  plan->add_option("--progress", list_issue_opt.progress, "auto, tty, plain or none (default auto; none with --quiet)")
      ->check(CLI::IsMember({"auto", "tty", "plain", "none"}));
  on(plan, run_plan);

  auto* approve = batch_command(g, "approve", "Approve a planned batch (not by the operator who planned it)");
  approve->add_flag("--dry-run", list_issue_opt.dry_run, "Check the rules and report; change nothing");
  on(approve, run_approve);

  auto* run = batch_command(g, "run", "Run (or resume) an approved batch: every pending user through the claim flow");
  run->add_option("--workers", list_issue_opt.workers, "Worker connections in this process (default 1)")
      ->check(CLI::Range(1, 64));
  run->add_option("--rate", list_issue_opt.rate, "At most this many users per second (default: no limit)")
      ->check(CLI::Range(0.0, 1e9));
  run->add_option("--chunk", list_issue_opt.chunk, "Users per transaction (default 500, at most 10000)")
      ->check(CLI::Range(int64_t(1), jobs::list_issue::kMostChunk));
  add_job_options(run, list_issue_opt.job);
  run->add_option("--progress", list_issue_opt.progress, "auto, tty, plain or none (default auto; none with --quiet)")
      ->check(CLI::IsMember({"auto", "tty", "plain", "none"}));
  on(run, run_run);

  on(batch_command(g, "status", "Counts per item state, rate, ETA and the last error of a batch"), run_batch_status);

  auto* items = batch_command(g, "items", "The items of a batch in file order: user, state, record code, reason");
  items->add_option("--state", list_issue_opt.state, "Only items in this state")
      ->check(CLI::IsMember(all_names<ListItemState>()));
  items->add_option("--limit", list_issue_opt.limit, "At most N items (default 100)")->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  on(items, run_items);

  auto* cancel = batch_command(g, "cancel", "Cancel a batch: pending and held items are cancelled; a running worker stops after its chunk");
  cancel->add_option("--reason", list_issue_opt.reason, "Why (recorded)");
  cancel->add_flag("--dry-run", list_issue_opt.dry_run, "Report what would be cancelled; change nothing");
  cancel->add_flag("-y,--yes", list_issue_opt.yes, "Do not ask for confirmation (needed without a terminal)");
  on(cancel, run_cancel);

  auto* list = g->add_subcommand("list", "Every batch, newest first");
  list->add_option("--activity", list_issue_opt.activity, "Only batches of this activity");
  on(list, run_list);
}

}  // namespace rc::cli
