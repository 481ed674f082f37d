// fuse-scan | fuse list | fuse show | fuse release | fuse confirm | fuse block | fuse unblock
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "cli/engine_setup.hpp"
#include "cli/job_common.hpp"
#include "core/engine/engine.hpp"
#include "core/states.hpp"
#include "jobs/runtime/alert.hpp"
#include "jobs/fuse/fuse.hpp"

namespace rc::cli {
namespace {

namespace fz = jobs::fuse;

struct {
  std::string event, state, reason, activity, prize;
  bool dry_run = false, false_alarm = false;
  JobFlags job;
} fuse_opt;

const std::vector<Column> kEventCols = {{"event", "EVENT"},       {"activity", "ACTIVITY"}, {"prize", "PRIZE"},
                                        {"rule", "RULE"},         {"kind", "KIND"},         {"state", "STATE"},
                                        {"decision", "DECISION"}, {"observed_count", "COUNT"},
                                        {"observed_amount", "AMOUNT"}, {"created_at", "AT"}};

Exit run_scan(Ctx& ctx) {
  fz::ScanOptions o;
  o.post = alert_poster(ctx);  // a bad [alerts] table fails before any work
  std::vector<json> trips;
  auto rc = run_job_command(ctx, "fuse-scan", fuse_opt.job, [&](jobs::JobRun& run) {
    for (auto& e : fz::scan(run, o).trips) trips.push_back(event_json(e));
  });
  if (!trips.empty()) ctx.out.rows(kEventCols, trips, "trip");
  return rc;
}

Exit decided(Ctx& ctx, const fz::Decision& d) {
  auto j = event_json(d.event);
  j["changed"] = d.changed;
  j["message"] = d.message;
  j["dry_run"] = fuse_opt.dry_run;
  const auto& h = d.held;
  j["held"] = {{"pending", h.held},       {"granted", h.granted}, {"rejected", h.rejected},
               {"still_held", h.still_held}, {"cancelled", h.cancelled}, {"decided_elsewhere", h.decided},
               {"rejected_reasons", h.reasons}};
  ctx.out.record(j);
  spdlog::info("{}", d.message);
  return Exit::ok;
}

// The operator's words, checked at the edge before the database is opened (exit 64).
// `on_event`: the command names an EVENT (release, confirm), otherwise an ACTIVITY (block, unblock).
void check_inputs(bool on_event, bool reason_required) {
  if (on_event) check_text(fuse_opt.event, "EVENT", kMaxNameBytes, true);
  else check_text(fuse_opt.activity, "ACTIVITY", kMaxNameBytes, true);
  check_text(fuse_opt.prize, "--prize", kMaxNameBytes, false);
  check_text(fuse_opt.reason, "--reason", kMaxReasonBytes, reason_required);
}

std::optional<std::string> prize_opt() {
  if (fuse_opt.prize.empty()) return std::nullopt;
  return fuse_opt.prize;
}

}  // namespace

void register_fuse(CLI::App& app, Ctx& ctx) {
  auto* scan = app.add_subcommand("fuse-scan", "Job: evaluate every fuse rule; a trip blocks the prize or activity and alerts (exit 1)");
  add_job_options(scan, fuse_opt.job);
  scan->callback([&ctx] { ctx.action = [&ctx] { return run_scan(ctx); }; });

  auto* fuse = app.add_subcommand("fuse", "Fuse events: list, show, release, confirm; manual block/unblock")
                   ->require_subcommand(1);
  auto* list = fuse->add_subcommand("list", "Fuse events, newest first");
  list->add_option("--state", fuse_opt.state, "Only tripped or released events")
      ->check(CLI::IsMember(all_names<FuseEventState>()));
  list->callback([&ctx] {
    ctx.action = [&ctx] {
      auto st = ctx.open_store();
      std::optional<std::string> s;
      if (!fuse_opt.state.empty()) s = fuse_opt.state;
      std::vector<json> rows;
      for (auto& e : fz::list_events(st->autocommit(), s)) rows.push_back(event_json(e));
      ctx.out.rows(kEventCols, rows, "event");
      return Exit::ok;
    };
  });
  auto* show = fuse->add_subcommand("show", "One event, the figures that tripped it, and the requests it held");
  show->add_option("EVENT", fuse_opt.event, "Batch number (or id)")->required();
  show->callback([&ctx] {
    ctx.action = [&ctx] {
      auto st = ctx.open_store();
      auto e = fz::find_event(st->autocommit(), fuse_opt.event);
      if (!e) throw Error(Errc::not_found, "no fuse event '" + fuse_opt.event + "' (see fuse list)");
      // the requests it held and what became of each, then the event itself
      std::vector<json> rows;
      for (auto& h : fz::held_requests(st->autocommit(), e->id))
        rows.push_back({{"record_code", h.record_code}, {"user", h.user}, {"biz_id", h.biz_id}, {"state", h.state},
                        {"reason", h.reason}, {"held_at", format_utc(h.created_at)},
                        {"updated_at", format_utc(h.updated_at)}});
      if (!rows.empty())
        ctx.out.rows({{"record_code", "RECORD"}, {"user", "USER"}, {"biz_id", "BIZ_ID"}, {"state", "STATE"},
                      {"reason", "REASON"}, {"held_at", "HELD AT"}},
                     rows, "held");
      auto j = event_json(*e);
      if (ctx.out.json_mode()) j["type"] = "event";
      j["held_requests"] = int64_t(rows.size());
      ctx.out.record(j);
      return Exit::ok;
    };
  });
  auto* rel = fuse->add_subcommand("release",
                                   "A false alarm: unblock the prize or activity; its held requests are claimed again");
  rel->add_option("EVENT", fuse_opt.event, "Batch number (or id)")->required();
  rel->add_flag("--false-alarm", fuse_opt.false_alarm, "Required: the operator's statement that the trip was a false alarm");
  rel->add_option("--reason", fuse_opt.reason, "Why (recorded)");
  rel->add_flag("--dry-run", fuse_opt.dry_run, "Report what would change; change nothing");
  rel->callback([&ctx] {
    ctx.action = [&ctx] {
      if (!fuse_opt.false_alarm) throw Error(Errc::usage, "fuse release needs --false-alarm (use fuse confirm to keep it blocked)");
      check_inputs(true, false);
      auto st = ctx.open_store();
      engine::Engine eng(*st, *ctx.clock, engine_options(ctx));
      return decided(ctx, fz::release(eng, fuse_opt.event, fuse_opt.reason.empty() ? "false alarm" : fuse_opt.reason,
                                      ctx.settings.operator_name, ctx.now(), fuse_opt.dry_run));
    };
  });
  auto* conf = fuse->add_subcommand("confirm",
                                    "A real incident: the prize or activity stays blocked; its held requests are cancelled");
  conf->add_option("EVENT", fuse_opt.event, "Batch number (or id)")->required();
  conf->add_option("--reason", fuse_opt.reason, "Why (recorded)")->required();
  conf->add_flag("--dry-run", fuse_opt.dry_run, "Report what would change; change nothing");
  conf->callback([&ctx] {
    ctx.action = [&ctx] {
      check_inputs(true, true);
      auto st = ctx.open_store();
      return decided(ctx, fz::confirm(*st, fuse_opt.event, fuse_opt.reason, ctx.settings.operator_name, ctx.now(), fuse_opt.dry_run));
    };
  });
  auto* blk = fuse->add_subcommand("block", "Manual kill switch: block an activity or one prize now");
  blk->add_option("ACTIVITY", fuse_opt.activity, "Activity code")->required();
  blk->add_option("--prize", fuse_opt.prize, "Only this prize");
  blk->add_option("--reason", fuse_opt.reason, "Why (recorded)")->required();
  blk->add_flag("--dry-run", fuse_opt.dry_run, "Report what would change; change nothing");
  blk->callback([&ctx] {
    ctx.action = [&ctx] {
      check_inputs(false, true);
      auto st = ctx.open_store();
      return decided(ctx, fz::block(*st, fuse_opt.activity, prize_opt(), fuse_opt.reason, ctx.settings.operator_name, ctx.now(),
                                    fuse_opt.dry_run));
    };
  });
  auto* ub = fuse->add_subcommand("unblock",
                                  "Release every open event on an activity or one prize; their held requests are claimed again");
  ub->add_option("ACTIVITY", fuse_opt.activity, "Activity code")->required();
  ub->add_option("--prize", fuse_opt.prize, "Only this prize");
  ub->add_option("--reason", fuse_opt.reason, "Why (recorded)")->required();
  ub->add_flag("--dry-run", fuse_opt.dry_run, "Report what would change; change nothing");
  ub->callback([&ctx] {
    ctx.action = [&ctx] {
      check_inputs(false, true);
      auto st = ctx.open_store();
      engine::Engine eng(*st, *ctx.clock, engine_options(ctx));
      return decided(ctx, fz::unblock(eng, fuse_opt.activity, prize_opt(), fuse_opt.reason, ctx.settings.operator_name,
                                      ctx.now(), fuse_opt.dry_run));
    };
  });
}

}  // namespace rc::cli
