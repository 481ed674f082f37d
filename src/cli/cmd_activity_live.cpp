// activity blacklist | gray (add, remove) | stock | budget | change (list, approve, reject):
// live changes to a running activity (core/activity/live.hpp).
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/context.hpp"
#include "cli/engine_setup.hpp"
#include "cli/wiring.hpp"
#include "core/alert_outbox.hpp"
#include "core/activity/live.hpp"
#include "core/identifier.hpp"
#include "core/states.hpp"
#include "jobs/import/rows.hpp"
#include "jobs/input/input.hpp"

namespace rc::cli {
namespace {

namespace live = rc::activity::live;

struct {
  std::string code, prize, reason, file, state;
  std::vector<std::string> users;
  int64_t add = 0, remove = 0, raise = 0, set = -1, id = 0;
  bool dry_run = false;
} activity_live_opt;

activity::Actor live_actor(Ctx& ctx) { return {ctx.settings.operator_name, activity_live_opt.dry_run}; }

// The users named on the command line and in -f FILE (a CSV with a user_id column, the rules of
// import-qualifications). Any invalid one refuses the whole command, naming it (FILE:LINE for the file).
std::vector<std::string> users() {
  std::vector<std::string> out;
  for (auto& u : activity_live_opt.users) out.push_back(require_identifier(u, IdKind::user, "USER"));
  if (!activity_live_opt.file.empty()) {
    auto in = jobs::import::open_input(activity_live_opt.file);
    auto h = jobs::import::read_header(*in->reader);
    csv::Record rec;
    std::string uid, ext;
    while (in->reader->next(rec)) {
      std::string why = jobs::import::check_row(h, rec, uid, ext);
      if (!why.empty()) throw Error(Errc::bad_input, in->reader->where(rec.line) + ": " + why + ": nothing was changed");
      out.push_back(uid);
    }
  }
  if (out.empty()) throw Error(Errc::usage, "name at least one USER, or -f FILE with a user_id column");
  return out;
}

json change_json(const live::Change& c) {
  auto opt_i = [](const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); };
  auto opt_s = [](const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); };
  return {{"id", c.id ? json(c.id) : json(nullptr)},
          {"activity", c.code},
          {"kind", c.kind},
          {"prize", c.prize.empty() ? json(nullptr) : json(c.prize)},
          {"amount", c.amount},
          {"state", c.state},
          {"reason", c.reason},
          {"requested_by", c.requested_by},
          {"decided_by", opt_s(c.decided_by)},
          {"decision_reason", opt_s(c.decision_reason)},
          {"before", opt_i(c.before)},
          {"after", opt_i(c.after)},
          {"created_at", format_utc(c.created_at)},
          {"decided_at", c.decided_at ? json(format_utc(*c.decided_at)) : json(nullptr)}};
}

Exit print_change(Ctx& ctx, const live::Change& c) {
  spdlog::info("{}{}", c.dry_run ? "dry run: " : "", c.message);
  auto j = change_json(c);
  j["dry_run"] = c.dry_run;
  j["message"] = c.message;
  ctx.out.record(j);
  return Exit::ok;
}

// Runs a change that may move the budget ladder, and posts the alert a step going up queued
// (core/alert_outbox.hpp) once it is committed; a broken [alerts] table leaves it to fuse-scan.
Exit change_with_alert(Ctx& ctx, const std::function<live::Change(store::Store&)>& run) {
  const AlertPoster post = alert_poster_or_none(ctx);
  auto st = ctx.open_store();
  const live::Change c = run(*st);
  if (c.ladder && c.ladder->alert_id && !c.dry_run)
    deliver_alert(*st, *c.ladder->alert_id, post, c.decided_by.value_or(c.requested_by), ctx.now());
  return print_change(ctx, c);
}

Exit run_list_change(Ctx& ctx, live::UserList list, bool add) {
  auto us = users();
  auto st = ctx.open_store();
  auto r = live::change_user_list(*st, activity_live_opt.code, list, add, us, live_actor(ctx), ctx.now());
  spdlog::info("{}{} list of {}: {} {} of {} user(s)", r.dry_run ? "dry run: " : "", r.list, r.code,
               add ? "added" : "removed", r.changed, r.requested);
  ctx.out.record({{"activity", r.code}, {"list", r.list}, {"op", r.op}, {"requested", r.requested},
                  {"changed", r.changed}, {"dry_run", r.dry_run}});
  return Exit::ok;
}

Exit run_stock(Ctx& ctx) {
  if ((activity_live_opt.add > 0) == (activity_live_opt.remove > 0)) throw Error(Errc::usage, "activity stock needs exactly one of --add N or --remove N");
  check_text(activity_live_opt.reason, "--reason", kMaxReasonBytes, true);
  live::ChangeSpec c{activity_live_opt.add > 0 ? live::ChangeKind::stock_add : live::ChangeKind::stock_remove, activity_live_opt.code, activity_live_opt.prize,
                     activity_live_opt.add > 0 ? activity_live_opt.add : activity_live_opt.remove, activity_live_opt.reason};
  return change_with_alert(
      ctx, [&](store::Store& st) { return live::request(st, c, ctx.settings.review_required, live_actor(ctx), ctx.now()); });
}

Exit run_budget(Ctx& ctx) {
  if ((activity_live_opt.raise > 0) == (activity_live_opt.set >= 0))
    throw Error(Errc::usage, "activity budget needs exactly one of --raise CENTS or --set CENTS");
  check_text(activity_live_opt.reason, "--reason", kMaxReasonBytes, true);
  live::ChangeSpec c{activity_live_opt.raise > 0 ? live::ChangeKind::budget_raise : live::ChangeKind::budget_set, activity_live_opt.code, "",
                     activity_live_opt.raise > 0 ? activity_live_opt.raise : activity_live_opt.set, activity_live_opt.reason};
  return change_with_alert(
      ctx, [&](store::Store& st) { return live::request(st, c, ctx.settings.review_required, live_actor(ctx), ctx.now()); });
}


}  // namespace

void register_activity_live(CLI::App& app, Ctx& ctx) {
  auto* g = activity_group(app);
  for (auto list : {live::UserList::black, live::UserList::gray}) {
    const bool black = list == live::UserList::black;
    auto* lg = g->add_subcommand(black ? "blacklist" : "gray",
                                 black ? "Users who may never claim in an activity (any state; effective on the next claim)"
                                       : "Users who may claim while an activity is published to the gray list")
                   ->require_subcommand(1);
    for (bool add : {true, false}) {
      auto* c = lg->add_subcommand(add ? "add" : "remove", add ? "Add users to the list" : "Remove users from the list");
      c->add_option("CODE", activity_live_opt.code, "Activity code")->required();
      c->add_option("USER", activity_live_opt.users, "User ids");
      c->add_option("-f,--file", activity_live_opt.file, "CSV file with a user_id column (the rules of import-qualifications); - reads standard input");
      add_dry_run(c, activity_live_opt.dry_run);
      on(c, ctx, [list, add](Ctx& cx) { return run_list_change(cx, list, add); });
    }
  }

  auto* stock = g->add_subcommand("stock", "Add stock to a running prize (spread over its buckets) or remove what is left");
  stock->add_option("CODE", activity_live_opt.code, "Activity code")->required();
  stock->add_option("--prize", activity_live_opt.prize, "Prize code")->required();
  stock->add_option("--add", activity_live_opt.add, "Units to add (a cash or costly prize needs a second operator when review.required)")
      ->check(CLI::Range(int64_t(1), INT64_MAX));
  stock->add_option("--remove", activity_live_opt.remove, "Units to remove; never more than what is left")->check(CLI::Range(int64_t(1), INT64_MAX));
  stock->add_option("--reason", activity_live_opt.reason, "Why (recorded)")->required();
  add_dry_run(stock, activity_live_opt.dry_run);
  on(stock, ctx, run_stock);

  auto* budget = g->add_subcommand("budget", "Raise the authorised budget of a running activity, or set it (never below consumed)");
  budget->add_option("CODE", activity_live_opt.code, "Activity code")->required();
  budget->add_option("--raise", activity_live_opt.raise, "Cents to authorise on top (a second operator approves when review.required)")
      ->check(CLI::Range(int64_t(1), INT64_MAX));
  budget->add_option("--set", activity_live_opt.set, "Authorised budget in cents; refused below what is consumed")
      ->check(CLI::Range(int64_t(0), INT64_MAX));
  budget->add_option("--reason", activity_live_opt.reason, "Why (recorded)")->required();
  add_dry_run(budget, activity_live_opt.dry_run);
  on(budget, ctx, run_budget);

  auto* ch = g->add_subcommand("change", "Changes to stock and budget: list, approve, reject")->require_subcommand(1);
  auto* cl = ch->add_subcommand("list", "Every change, newest first");
  cl->add_option("--activity", activity_live_opt.code, "Only changes of this activity");
  cl->add_option("--state", activity_live_opt.state, "Only changes in this state")->check(CLI::IsMember(all_names<ChangeRequestState>()));
  on(cl, ctx, [](Ctx& c) {
    auto st = c.open_store();
    std::optional<std::string> code, state;
    if (!activity_live_opt.code.empty()) code = activity_live_opt.code;
    if (!activity_live_opt.state.empty()) state = activity_live_opt.state;
    std::vector<json> rows;
    for (auto& x : live::list(*st, code, state)) rows.push_back(change_json(x));
    c.out.rows({{"id", "ID"}, {"activity", "ACTIVITY"}, {"kind", "KIND"}, {"prize", "PRIZE"}, {"amount", "AMOUNT"},
                {"state", "STATE"}, {"requested_by", "BY"}, {"decided_by", "DECIDED BY"}, {"before", "BEFORE"},
                {"after", "AFTER"}, {"reason", "REASON"}},
               rows, "change");
    return Exit::ok;
  });
  auto* ca = ch->add_subcommand("approve", "Approve a proposed change (not by its proposer); it applies at once");
  ca->add_option("ID", activity_live_opt.id, "Change id (from activity change list)")->required();
  add_dry_run(ca, activity_live_opt.dry_run);
  on(ca, ctx, [](Ctx& c) {
    return change_with_alert(c, [&](store::Store& st) { return live::approve(st, activity_live_opt.id, live_actor(c), c.now()); });
  });
  auto* cr = ch->add_subcommand("reject", "Reject a proposed change");
  cr->add_option("ID", activity_live_opt.id, "Change id")->required();
  cr->add_option("--reason", activity_live_opt.reason, "Why (recorded)")->required();
  add_dry_run(cr, activity_live_opt.dry_run);
  on(cr, ctx, [](Ctx& c) {
    check_text(activity_live_opt.reason, "--reason", kMaxReasonBytes, true);
    auto st = c.open_store();
    return print_change(c, live::reject(*st, activity_live_opt.id, activity_live_opt.reason, live_actor(c), c.now()));
  });
}

}  // namespace rc::cli
