// activity create | update | apply | approve | reject | publish | pause | resume | offline | show | list | history
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/context.hpp"
#include "cli/formats.hpp"
#include "cli/wiring.hpp"
#include "core/activity/activity.hpp"
#include "core/activity/read.hpp"
#include "jobs/drill/drill.hpp"
#include "util/hash.hpp"

namespace rc::cli {
namespace {

using namespace rc::activity;

struct {
  std::string file, code, role, comment, reason, state;
  bool dry_run = false, publish = false, gray = false, full = false, yes = false;
} activity_opt;

// Reads and reviews the definition in --file; refuses (65) when any finding is an error.
Definition reviewed(Ctx& ctx, std::string& text) {
  text = read_input_file(activity_opt.file);
  return reviewed_definition(ctx, text, activity_opt.file);
}

Actor actor(Ctx& ctx) { return Actor{ctx.settings.operator_name, activity_opt.dry_run}; }

Exit print_created(Ctx& ctx, const CreateResult& r) {
  for (auto& l : r.log) spdlog::info("{}{}", r.dry_run ? "dry run: " : "", l);
  json j{{"code", r.code}, {"state", r.state}, {"definition_hash", r.hash}, {"dry_run", r.dry_run}};
  if (r.version) {
    j["version"] = r.version;
    j["version_state"] = r.version_state;
  }
  ctx.out.record(j);
  return Exit::ok;
}

Exit print_transition(Ctx& ctx, const TransitionResult& r) {
  bool refused = !r.changed && !r.dry_run;
  if (refused) spdlog::error("{}", r.message);
  else spdlog::info("{}", r.message);
  json j{{"code", r.code},
         {"changed", r.changed},
         {"dry_run", r.dry_run},
         {"from", r.from},
         {"to", r.to},
         {"state", r.changed ? r.to : r.from},
         {"message", r.message}};
  if (r.version) j["version"] = *r.version;  // from/to/state are that version's
  ctx.out.record(j);
  return refused ? Exit::findings : Exit::ok;
}

// review.drill_required: what goes live must be a definition whose latest drill passed (77 otherwise).
void require_drill(Ctx& ctx, store::Store& st, const std::string& code, const std::string& hash) {
  if (!ctx.settings.review_drill_required) return;
  if (!jobs::drill::passing_run(st.autocommit(), code, hash))
    throw Error(Errc::not_permitted, "activity " + code + ": review.drill_required is on and its definition " +
                                         hash.substr(0, 12) + " has no passing drill (or its latest drill failed): run "
                                         "`rewardctl drill " + code + "` first (nothing changed)");
}

Exit run_create(Ctx& ctx) {
  std::string text;
  auto def = reviewed(ctx, text);
  auto st = ctx.open_store();
  if (activity_opt.publish) require_drill(ctx, *st, def.code, sha256_hex(text));
  CreateOptions o{activity_opt.publish, ctx.settings.review_required};
  return print_created(ctx, create(*st, def, text, o, actor(ctx), ctx.now()));
}

Exit run_update(Ctx& ctx) {
  std::string text;
  auto def = reviewed(ctx, text);
  auto st = ctx.open_store();
  CreateOptions o{activity_opt.publish, ctx.settings.review_required};
  return print_created(ctx, update(*st, def, text, actor(ctx), ctx.now(), o));
}

Exit run_apply(Ctx& ctx) {
  std::string text;
  auto def = reviewed(ctx, text);
  auto st = ctx.open_store();
  if (activity_opt.publish && !rc::activity::find(st->autocommit(), def.code)) require_drill(ctx, *st, def.code, sha256_hex(text));
  CreateOptions o{activity_opt.publish, ctx.settings.review_required};
  auto r = apply(*st, def, text, o, actor(ctx), ctx.now());
  for (auto& l : r.result.log) spdlog::info("{}{}", r.result.dry_run ? "dry run: " : "", l);
  if (r.action == "updated" && activity_opt.publish)
    spdlog::warn("--publish applies only when apply creates the activity: '{}' is {}", r.result.code, r.result.state);
  ctx.out.record({{"code", r.result.code},
                  {"action", r.action},
                  {"state", r.result.state},
                  {"definition_hash", r.result.hash},
                  {"previous_hash", r.previous_hash.empty() ? json(nullptr) : json(r.previous_hash)},
                  {"dry_run", r.result.dry_run}});
  return Exit::ok;
}

Role role() { return activity_opt.role == "product" ? Role::product : Role::tech; }



}  // namespace

void register_activity(CLI::App& app, Ctx& ctx) {
  auto* g = activity_group(app);

  auto* create = g->add_subcommand("create", "Lint a definition and store it (state pending_review)");
  create->add_option("-f,--file", activity_opt.file, "Definition file (TOML), - for standard input")->required();
  create->add_flag("--publish", activity_opt.publish, "Go straight to live; only with review.required = false (test environments)");
  add_dry_run(create, activity_opt.dry_run);
  on(create, ctx, run_create);

  auto* update = g->add_subcommand(
      "update", "Store a new definition version: replaces it before publishing (voids approvals); for a gray, live or "
                "paused activity, proposes version N+1 for review while N keeps running (the tech approval switches)");
  update->add_option("-f,--file", activity_opt.file, "Definition file (TOML), - for standard input")->required();
  update->add_flag("--publish", activity_opt.publish,
                   "A running activity switches to the new version at once; only with review.required = false");
  add_dry_run(update, activity_opt.dry_run);
  on(update, ctx, run_update);

  auto* apply = g->add_subcommand(
      "apply", "Create, update or leave unchanged, as the stored definition hash says (idempotent; for CI seeding)");
  apply->add_option("-f,--file", activity_opt.file, "Definition file (TOML), - for standard input")->required();
  apply->add_flag("--publish", activity_opt.publish,
                  "When apply creates it, go straight to live; only with review.required = false (test environments)");
  add_dry_run(apply, activity_opt.dry_run);
  on(apply, ctx, run_apply);

  auto* approve = g->add_subcommand("approve", "Approve as product (first) or tech (second)");
  approve->add_option("CODE", activity_opt.code, "Activity code")->required();
  approve->add_option("--as", activity_opt.role, "Review role: product or tech")->required()->check(CLI::IsMember({"product", "tech"}));
  approve->add_option("--comment", activity_opt.comment, "Comment kept with the approval");
  add_dry_run(approve, activity_opt.dry_run);
  on(approve, ctx, [](Ctx& c) {
    check_text(activity_opt.comment, "--comment", kMaxReasonBytes, false);
    auto st = c.open_store();
    std::optional<std::string> comment;
    if (!activity_opt.comment.empty()) comment = activity_opt.comment;
    return print_transition(c, rc::activity::approve(*st, activity_opt.code, role(), comment,
                                                     {c.settings.review_distinct_approvers}, actor(c), c.now()));
  });

  auto* reject = g->add_subcommand("reject", "Reject a definition under review");
  reject->add_option("CODE", activity_opt.code, "Activity code")->required();
  reject->add_option("--as", activity_opt.role, "Review role: product or tech")->required()->check(CLI::IsMember({"product", "tech"}));
  reject->add_option("--reason", activity_opt.reason, "Why (recorded)")->required();
  add_dry_run(reject, activity_opt.dry_run);
  on(reject, ctx, [](Ctx& c) {
    check_text(activity_opt.reason, "--reason", kMaxReasonBytes, true);
    auto st = c.open_store();
    return print_transition(c, rc::activity::reject(*st, activity_opt.code, role(), activity_opt.reason, actor(c), c.now()));
  });

  auto* publish = g->add_subcommand("publish", "Publish an approved activity to the gray list (--gray) or everyone (--full)");
  publish->add_option("CODE", activity_opt.code, "Activity code")->required();
  auto* gray = publish->add_flag("--gray", activity_opt.gray, "Only users on the gray list may claim");
  auto* full = publish->add_flag("--full", activity_opt.full, "Everyone may claim");
  gray->excludes(full);
  add_dry_run(publish, activity_opt.dry_run);
  on(publish, ctx, [](Ctx& c) {
    if (activity_opt.gray == activity_opt.full) throw Error(Errc::usage, "activity publish needs exactly one of --gray or --full");
    auto st = c.open_store();
    if (c.settings.review_drill_required) {
      // only a publish that would happen asks (an illegal transition reports its own state)
      auto a = rc::activity::get(st->autocommit(), activity_opt.code);
      if (a.state == ActivityState::approved || a.state == ActivityState::gray)
        require_drill(c, *st, a.code, a.definition_hash);
    }
    return print_transition(c, control(*st, activity_opt.code, activity_opt.gray ? Op::publish_gray : Op::publish_full, std::nullopt,
                                       actor(c), c.now()));
  });

  for (auto [name, op, help] : {std::tuple{"pause", Op::pause, "Stop claims for now (gray or live -> paused)"},
                                std::tuple{"resume", Op::resume, "Resume a paused activity to where it was"}}) {
    auto* c = g->add_subcommand(name, help);
    c->add_option("CODE", activity_opt.code, "Activity code")->required();
    c->add_option("--reason", activity_opt.reason, "Why (recorded)");
    add_dry_run(c, activity_opt.dry_run);
    Op o = op;
    on(c, ctx, [o](Ctx& cx) {
      check_text(activity_opt.reason, "--reason", kMaxReasonBytes, false);
      auto st = cx.open_store();
      std::optional<std::string> reason;
      if (!activity_opt.reason.empty()) reason = activity_opt.reason;
      return print_transition(cx, control(*st, activity_opt.code, o, reason, actor(cx), cx.now()));
    });
  }

  auto* offline = g->add_subcommand("offline", "Take an activity offline for good (asks on a TTY unless --yes)");
  offline->add_option("CODE", activity_opt.code, "Activity code")->required();
  offline->add_option("--reason", activity_opt.reason, "Why (recorded)")->required();
  offline->add_flag("-y,--yes", activity_opt.yes, "Do not ask for confirmation (needed without a terminal)");
  add_dry_run(offline, activity_opt.dry_run);
  on(offline, ctx, [](Ctx& c) {
    check_text(activity_opt.reason, "--reason", kMaxReasonBytes, true);
    auto st = c.open_store();
    confirm_irreversible(activity_opt.yes || activity_opt.dry_run, "activity offline",
                         "Take activity '" + activity_opt.code + "' offline for good? Claims stop and it cannot be published again.");
    return print_transition(c, control(*st, activity_opt.code, Op::offline, activity_opt.reason, actor(c), c.now()));
  });

  auto* show = g->add_subcommand("show", "Summary, state, window, stock left per prize, budget and its ladder step, reviews");
  show->add_option("CODE", activity_opt.code, "Activity code")->required();
  on(show, ctx, [](Ctx& c) {
    auto st = c.open_store();
    auto j = activity_summary_json(rc::activity::show(*st, activity_opt.code));
    c.out.record(j);
    if (!c.out.json_mode()) {
      c.out.text("");
      c.out.rows({{"prize", "PRIZE"}, {"item", "ITEM"}, {"amount", "AMOUNT"}, {"stock", "STOCK"},
                  {"stock_left", "LEFT"}, {"buckets", "BUCKETS"}, {"weight", "WEIGHT"}, {"channel", "CHANNEL"},
                  {"retired", "RETIRED"}, {"high_value", "HIGH_VALUE"}},
                 std::vector<json>(j["prizes"].begin(), j["prizes"].end()));
      if (!j["reviews"].empty()) {
        c.out.text("");
        c.out.rows({{"at", "AT"}, {"version", "VERSION"}, {"role", "ROLE"}, {"decision", "DECISION"},
                    {"operator", "OPERATOR"}, {"voided", "VOIDED"}, {"comment", "COMMENT"}},
                   std::vector<json>(j["reviews"].begin(), j["reviews"].end()));
      }
    }
    return Exit::ok;
  });

  auto* list = g->add_subcommand("list", "List activities");
  list->add_option("--state", activity_opt.state, "Only activities in this state");
  on(list, ctx, [](Ctx& c) {
    auto st = c.open_store();
    std::optional<std::string> s;
    if (!activity_opt.state.empty()) s = activity_opt.state;
    std::vector<json> rows;
    for (auto& a : rc::activity::list(*st, s)) rows.push_back(activity_list_json(a));
    c.out.rows({{"code", "CODE"}, {"kind", "KIND"}, {"state", "STATE"}, {"start", "START"}, {"end", "END"},
                {"name", "NAME"}},
               rows, "activity");
    return Exit::ok;
  });

  auto* history = g->add_subcommand(
      "history", "Status log and audit trail of an activity, oldest first, then its definition versions");
  history->add_option("CODE", activity_opt.code, "Activity code")->required();
  on(history, ctx, [](Ctx& c) {
    auto st = c.open_store();
    std::vector<json> rows, versions;
    for (auto& e : rc::activity::history(*st, activity_opt.code)) rows.push_back(history_json(e));
    for (auto& v : rc::activity::version_history(*st, activity_opt.code)) versions.push_back(version_json(v));
    c.out.rows({{"at", "AT"}, {"source", "SOURCE"}, {"actor", "ACTOR"}, {"what", "WHAT"}, {"detail", "DETAIL"}}, rows,
               "event");
    if (!c.out.json_mode()) c.out.text("");
    c.out.rows({{"version", "VERSION"}, {"state", "STATE"}, {"hash", "SHA-256"}, {"proposed_by", "PROPOSED BY"},
                {"at", "AT"}, {"product_by", "PRODUCT"}, {"tech_by", "TECH"}, {"switched_at", "SWITCHED"},
                {"reason", "REASON"}},
               versions, "version");
    return Exit::ok;
  });
}

}  // namespace rc::cli
