// drill ACTIVITY | -f FILE [--workers K] [--peak-qps Q] [--scratch-db URI] [--lottery-draws N] [--dry-run]
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cmath>

#include "cli/context.hpp"
#include "core/activity/activity.hpp"
#include "core/delivery/channel.hpp"
#include "jobs/drill/drill.hpp"

namespace rc::cli {
namespace {

namespace dr = jobs::drill;

struct {
  std::string activity, file, scratch;
  int workers = 16;
  double peak_qps = 0;
  int64_t draws = 100'000;
  double peak_seconds = 2.0;
  bool dry_run = false;
} drill_opt;
CLI::Option* peak_opt = nullptr;
CLI::Option* scratch_opt = nullptr;

Exit run_drill(Ctx& ctx) {
  if (drill_opt.activity.empty() == drill_opt.file.empty())
    throw Error(Errc::usage, "drill needs an ACTIVITY or -f FILE (one of them)");
  if (peak_opt->count() && !(std::isfinite(drill_opt.peak_qps) && drill_opt.peak_qps > 0 && drill_opt.peak_qps <= 1e12))
    throw Error(Errc::usage, "--peak-qps must be a number of claims per second above 0 (at most 1e12)");
  if (scratch_opt->count() && drill_opt.scratch.empty()) throw Error(Errc::usage, "--scratch-db is empty");
  auto live = ctx.open_store();  // the run is recorded here; a drill never writes anything else to it
  if (!drill_opt.dry_run)  // a role that cannot record the run finds out now, not after the drill
    live->transact(store::TxMode::write, [](store::Tx& tx) {
      tx.exec("INSERT INTO drill_run (activity_code, definition_hash, passed, checks, scratch, operator, started_at, "
              "finished_at) VALUES ('probe', 'probe', 0, '[]', '', '', 0, 0)");
      tx.rollback_only();
    });
  std::string text, source;
  if (!drill_opt.file.empty()) {
    text = read_input_file(drill_opt.file);
    source = drill_opt.file == "-" ? "<stdin>" : drill_opt.file;
  } else {
    text = activity::get(live->autocommit(), drill_opt.activity).definition;
    source = "activity " + drill_opt.activity;
  }
  const activity::Definition def = reviewed_definition(ctx, text, source);
  dr::Options o;
  o.text = text;
  o.source = source;
  o.workers = drill_opt.workers;
  if (peak_opt->count()) o.peak_qps = drill_opt.peak_qps;
  o.lottery_draws = drill_opt.draws;
  o.peak_seconds = drill_opt.peak_seconds;
  o.scratch_url = drill_opt.scratch;
  o.live_url = ctx.settings.db_url;
  o.pooled = ctx.store_options(false).pooled;
  o.live = live.get();
  o.operator_name = ctx.settings.operator_name;
  o.ledger_channels.clear();
  o.outbox_channels.clear();
  for (auto& [name, cfg] : delivery::parse_channels(ctx.settings)) {
    if (cfg.type == "ledger") o.ledger_channels.push_back(name);
    if (cfg.type == "outbox") o.outbox_channels.push_back(name);
  }
  o.on_check = [](const dr::Check& c) {
    if (c.result == "fail") spdlog::error("drill {}: FAIL {}", c.name, c.detail);
    else spdlog::info("drill {}: {} {}", c.name, c.result, c.detail);
  };
  dr::Report rep = dr::run(def, o, ctx.now());
  rep.finished_at = ctx.now();
  const int64_t run_id = drill_opt.dry_run ? 0 : dr::store_run(*live, rep, ctx.settings.operator_name);
  std::vector<json> rows;
  for (auto& c : rep.checks)
    rows.push_back({{"check", c.name}, {"result", c.result}, {"detail", c.detail}, {"figures", c.figures}});
  if (ctx.out.json_mode()) {
    ctx.out.rows({}, rows, "check");
  } else {
    for (auto& r : rows) r.erase("figures");
    ctx.out.rows({{"check", "CHECK"}, {"result", "RESULT"}, {"detail", "DETAIL"}}, rows);
  }
  int64_t failed = 0;
  for (auto& c : rep.checks) failed += c.result == "fail";
  ctx.out.record({{"type", "drill"}, {"run", run_id ? json(run_id) : json(nullptr)}, {"activity", rep.code},
                  {"definition_hash", rep.hash}, {"passed", rep.passed()}, {"failed", failed},
                  {"scratch", rep.scratch}, {"dry_run", drill_opt.dry_run}});
  if (rep.passed())
    spdlog::info("drill {}: passed{}", rep.code, run_id ? " (run " + std::to_string(run_id) + ")" : " (dry run: not recorded)");
  else
    spdlog::error("drill {}: {} check(s) failed", rep.code, failed);
  return rep.passed() ? Exit::ok : Exit::findings;
}

}  // namespace

void register_drill(CLI::App& app, Ctx& ctx) {
  auto* d = app.add_subcommand("drill", "Rehearse an activity in a scratch database: oversell, idempotency, limits, "
                                        "budget, lottery, fuse, expiry, peak, reconcile; exit 1 on any failed check");
  d->add_option("ACTIVITY", drill_opt.activity, "A stored activity's code (or give -f FILE)");
  d->add_option("-f,--file", drill_opt.file, "A definition file not yet created ('-' for standard input)");
  d->add_option("--workers", drill_opt.workers, "Concurrent worker processes of the concurrency checks, 2 to 256 (default 16)")
      ->check(CLI::Range(2, 256));
  peak_opt = d->add_option("--peak-qps", drill_opt.peak_qps,
                           "Expected peak claims/s: the peak check needs twice this (default: not run)");
  scratch_opt = d->add_option("--scratch-db", drill_opt.scratch,
                "Run in this database (empty, or made by an earlier drill) instead of a temporary SQLite file");
  d->add_option("--lottery-draws", drill_opt.draws, "Draws of the lottery frequency check (default 100000)")
      ->check(CLI::Range(int64_t(100), int64_t(10'000'000)));
  d->add_option("--peak-seconds", drill_opt.peak_seconds, "How long the peak check claims (default 2)")
      ->check(CLI::Range(0.2, 600.0));
  d->add_flag("--dry-run", drill_opt.dry_run, "Run every check but do not record the run in the live database");
  d->callback([&ctx] { ctx.action = [&ctx] { return run_drill(ctx); }; });
}

}  // namespace rc::cli
