// claim | record show | record reverse (also top-level reverse) | record complete | ledger balance | ledger entries
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/context.hpp"
#include "cli/engine_setup.hpp"
#include "cli/formats.hpp"
#include "core/activity/activity.hpp"
#include "core/engine/completion.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/ledger.hpp"
#include "core/engine/release.hpp"
#include "core/engine/reversal.hpp"
#include "core/identifier.hpp"

namespace rc::cli {

namespace {

struct {
  std::string activity, user, biz_id, source, prize, code, reason, request_id, bill;
  bool no_deliver = false, dry_run = false, ok = false, failed = false, downstream_reversed = false, yes = false;
} claim_opt;

Exit run_claim(Ctx& ctx) {
  engine::ClaimRequest r;
  check_text(claim_opt.activity, "ACTIVITY", kMaxNameBytes, true);  // PostgreSQL would refuse the bytes (65)
  r.activity = claim_opt.activity;
  r.user = require_identifier(claim_opt.user, IdKind::user, "--user");
  r.biz_id = require_identifier(claim_opt.biz_id, IdKind::key, "--biz-id");
  auto st = ctx.open_store();
  engine::Engine eng(*st, *ctx.clock, engine_options(ctx));
  if (!claim_opt.source.empty()) r.source = claim_opt.source;
  if (!claim_opt.prize.empty()) r.prize = claim_opt.prize;
  r.deliver = !claim_opt.no_deliver;
  r.dry_run = claim_opt.dry_run;
  auto o = eng.claim(r);
  json j{{"outcome", engine::status_name(o.status)}, {"activity", r.activity}, {"user", r.user}, {"biz_id", r.biz_id}};
  using engine::Reason;
  if (o.reason != Reason::none) j["reason"] = name(o.reason);
  if (o.reason == Reason::not_started || o.reason == Reason::ended) {
    // name the window, so that the operator knows when (or since when) the claim can work
    if (auto a = activity::find(st->autocommit(), r.activity)) {
      Millis t = o.reason == Reason::not_started ? a->start_at : a->end_at;
      j["message"] = std::string(o.reason == Reason::not_started ? "the activity starts at " : "the activity ended at ") +
                     format_in_zone(t, a->timezone) + " (" + format_utc(t) + ")";
    }
  }
  if (o.dry_run) j["dry_run"] = true;
  if (o.grant) {
    auto g = grant_json(*o.grant);
    for (auto it = g.begin(); it != g.end(); ++it)
      if (!j.contains(it.key())) j[it.key()] = it.value();
  }
  ctx.out.record(j);
  // rejected, and held by a fuse (a pending grant, reason held_by_fuse), exit 1
  return o.status == engine::Status::rejected || o.status == engine::Status::held ? Exit::findings : Exit::ok;
}

Exit run_reverse(Ctx& ctx) {
  if (claim_opt.code.empty() == claim_opt.biz_id.empty()) throw Error(Errc::usage, "reverse needs exactly one of RECORD or --biz-id");
  check_text(claim_opt.reason, "--reason", kMaxReasonBytes, true);
  if (!claim_opt.code.empty()) check_text(claim_opt.code, "RECORD", kMaxNameBytes, true);
  std::optional<std::string> rid;
  if (!claim_opt.request_id.empty()) rid = require_identifier(claim_opt.request_id, IdKind::key, "--request-id");
  if (!claim_opt.biz_id.empty()) claim_opt.biz_id = require_identifier(claim_opt.biz_id, IdKind::key, "--biz-id");
  auto st = ctx.open_store();
  if (claim_opt.code.empty()) {
    auto g = engine::find_grant_by_biz(st->autocommit(), claim_opt.biz_id);
    if (!g) throw Error(Errc::not_found, "no grant with biz id '" + claim_opt.biz_id + "'");
    claim_opt.code = g->record_code;
  }
  confirm_irreversible(claim_opt.yes || claim_opt.dry_run, "reverse",
                       "Reverse grant " + claim_opt.code + "? Its stock, limit and budget are returned; this cannot be undone.");
  auto o = engine::reverse(*st, claim_opt.code, claim_opt.reason, rid, ctx.settings.operator_name, ctx.now(), claim_opt.dry_run,
                           claim_opt.downstream_reversed);
  json j{{"record_code", claim_opt.code}, {"changed", o.changed}, {"replayed", o.replayed}, {"state", o.state},
         {"message", o.message}, {"dry_run", claim_opt.dry_run}};
  ctx.out.record(j);
  bool refused = !o.changed && !o.replayed && !claim_opt.dry_run;
  if (refused) spdlog::error("{}", o.message);
  return refused ? Exit::findings : Exit::ok;
}

void add_reverse_options(CLI::App* c) {
  c->add_option("RECORD", claim_opt.code, "Record code of the grant (or give --biz-id)");
  c->add_option("--biz-id", claim_opt.biz_id, "The grant of this idempotency key, instead of RECORD");
  c->add_option("--reason", claim_opt.reason, "Why (recorded)")->required();
  c->add_option("--request-id", claim_opt.request_id, "Idempotency key: a repeat with the same key does nothing");
  c->add_flag("--downstream-reversed", claim_opt.downstream_reversed,
              "The grant was delivered outside this database (webhook, outbox) and has been reversed there: "
              "return stock, limits and budget here (recorded in the audit)");
  c->add_flag("--dry-run", claim_opt.dry_run, "Check and report; change nothing");
  c->add_flag("-y,--yes", claim_opt.yes, "Do not ask for confirmation (needed without a terminal)");
}

}  // namespace

void register_claim(CLI::App& app, Ctx& ctx) {
  auto* claim = app.add_subcommand("claim", "Claim (or draw) a prize for a user: idempotent by --biz-id");
  claim->add_option("ACTIVITY", claim_opt.activity, "Activity code")->required();
  claim->add_option("--user", claim_opt.user, "User id")->required();
  claim->add_option("--biz-id", claim_opt.biz_id, "The caller's idempotency key: a replay returns the original grant")
      ->required();
  claim->add_option("--channel", claim_opt.source, "The caller's channel (app, web, ...), recorded on the grant");
  claim->add_option("--prize", claim_opt.prize, "Direct activities with several prizes: which one (default: the first)");
  claim->add_flag("--no-deliver", claim_opt.no_deliver, "Commit the grant (state init) without delivering it now");
  claim->add_flag("--dry-run", claim_opt.dry_run, "Run every check, then roll back: would this claim be granted?");
  claim->callback([&ctx] { ctx.action = [&ctx] { return run_claim(ctx); }; });

  auto* record = app.add_subcommand("record", "Grants (prize records): show, reverse, complete")->require_subcommand(1);
  auto* show = record->add_subcommand("show", "Show grants by record code, --biz-id, or --user [--activity]");
  show->add_option("RECORD", claim_opt.code, "Record code");
  show->add_option("--biz-id", claim_opt.biz_id, "The grant of this idempotency key");
  show->add_option("--user", claim_opt.user, "All grants of this user");
  show->add_option("--activity", claim_opt.activity, "With --user: only this activity");
  show->callback([&ctx] {
    ctx.action = [&ctx] {
      int given = !claim_opt.code.empty() + !claim_opt.biz_id.empty() + !claim_opt.user.empty();
      if (given != 1) throw Error(Errc::usage, "record show needs exactly one of RECORD, --biz-id or --user");
      if (!claim_opt.code.empty()) check_text(claim_opt.code, "RECORD", kMaxNameBytes, true);
      if (!claim_opt.biz_id.empty()) claim_opt.biz_id = require_identifier(claim_opt.biz_id, IdKind::key, "--biz-id");
      if (!claim_opt.user.empty()) claim_opt.user = require_identifier(claim_opt.user, IdKind::user, "--user");
      auto st = ctx.open_read_store();
      std::vector<engine::GrantView> gs;
      if (!claim_opt.code.empty()) {
        if (auto g = engine::find_grant(st->autocommit(), claim_opt.code)) gs.push_back(*g);
      } else if (!claim_opt.biz_id.empty()) {
        if (auto g = engine::find_grant_by_biz(st->autocommit(), claim_opt.biz_id)) gs.push_back(*g);
      } else {
        std::optional<std::string> a;
        if (!claim_opt.activity.empty()) a = claim_opt.activity;
        gs = engine::grants_of_user(st->autocommit(), claim_opt.user, a);
      }
      if (gs.empty() && claim_opt.user.empty())
        throw Error(Errc::not_found, claim_opt.code.empty() ? "no grant with biz id '" + claim_opt.biz_id + "'"
                                                      : "no grant with record code '" + claim_opt.code + "'");
      if (gs.size() == 1 && claim_opt.user.empty()) {
        auto j = grant_json(gs[0]);
        // a failed grant says whether its stock, budget and limit counts went back
        if (auto note = engine::release_note(st->autocommit(), gs[0].id)) j["released"] = *note;
        ctx.out.record(j);
        return Exit::ok;
      }
      std::vector<json> rows;
      for (auto& g : gs) rows.push_back(grant_json(g));
      ctx.out.rows({{"record_code", "RECORD"}, {"activity", "ACTIVITY"}, {"prize", "PRIZE"}, {"amount", "AMOUNT"},
                    {"state", "STATE"}, {"biz_id", "BIZ_ID"}, {"created_at", "CREATED"}},
                   rows, "grant");
      return Exit::ok;
    };
  });
  auto* rev = record->add_subcommand("reverse", "Reverse a successful grant (refund/cancel): success -> reversed");
  add_reverse_options(rev);
  rev->callback([&ctx] { ctx.action = [&ctx] { return run_reverse(ctx); }; });
  auto* rev2 = app.add_subcommand("reverse", "Same as `record reverse`");
  add_reverse_options(rev2);
  rev2->callback([&ctx] { ctx.action = [&ctx] { return run_reverse(ctx); }; });

  auto* comp = record->add_subcommand("complete", "Record the external system's answer for an outbox delivery");
  comp->add_option("BILL", claim_opt.bill, "Delivery bill number")->required();
  auto* okf = comp->add_flag("--ok", claim_opt.ok, "Delivered: awaiting_external -> success");
  auto* ff = comp->add_flag("--failed", claim_opt.failed, "Not delivered: awaiting_external -> failed (needs --reason)");
  okf->excludes(ff);
  comp->add_option("--reason", claim_opt.reason, "Why it failed");
  comp->add_flag("--dry-run", claim_opt.dry_run, "Check and report; change nothing");
  comp->callback([&ctx] {
    ctx.action = [&ctx] {
      if (claim_opt.ok == claim_opt.failed) throw Error(Errc::usage, "record complete needs exactly one of --ok or --failed");
      if (claim_opt.failed && claim_opt.reason.empty()) throw Error(Errc::usage, "record complete --failed needs --reason");
      check_text(claim_opt.reason, "--reason", kMaxReasonBytes, false);
      check_text(claim_opt.bill, "BILL", kMaxNameBytes, true);
      auto st = ctx.open_store();
      std::optional<std::string> reason;
      if (!claim_opt.reason.empty()) reason = claim_opt.reason;
      auto o = engine::complete(*st, claim_opt.bill, claim_opt.ok, reason, ctx.settings.operator_name, ctx.now(), claim_opt.dry_run);
      ctx.out.record({{"bill_no", claim_opt.bill}, {"changed", o.changed}, {"state", o.state}, {"message", o.message},
                      {"dry_run", claim_opt.dry_run}});
      bool refused = !o.changed && !claim_opt.dry_run;
      if (refused) spdlog::error("{}", o.message);
      return refused ? Exit::findings : Exit::ok;
    };
  });

  auto* ledger = app.add_subcommand("ledger", "The in-database ledger channel: balances and entries")->require_subcommand(1);
  auto* bal = ledger->add_subcommand("balance", "Balances of a user per asset");
  bal->add_option("USER", claim_opt.user, "User id")->required();
  bal->callback([&ctx] {
    ctx.action = [&ctx] {
      claim_opt.user = require_identifier(claim_opt.user, IdKind::user, "USER");
      auto st = ctx.open_read_store();
      auto balances = store::transact(*st, store::TxMode::read,
                                      [](store::Tx& tx) { return engine::ledger_balances(tx, claim_opt.user); });
      std::vector<json> rows;
      for (auto& b : balances) rows.push_back(ledger_balance_json(claim_opt.user, b));
      ctx.out.rows({{"asset", "ASSET"}, {"balance", "BALANCE"}, {"updated_at", "UPDATED"}}, rows, "balance");
      return Exit::ok;
    };
  });
  auto* ent = ledger->add_subcommand("entries", "Ledger entries of a user, oldest first");
  ent->add_option("USER", claim_opt.user, "User id")->required();
  ent->callback([&ctx] {
    ctx.action = [&ctx] {
      claim_opt.user = require_identifier(claim_opt.user, IdKind::user, "USER");
      auto st = ctx.open_read_store();
      auto entries = store::transact(*st, store::TxMode::read,
                                     [](store::Tx& tx) { return engine::ledger_entries(tx, claim_opt.user); });
      std::vector<json> rows;
      for (auto& e : entries) rows.push_back(ledger_entry_json(claim_opt.user, e));
      ctx.out.rows({{"at", "AT"}, {"kind", "KIND"}, {"asset", "ASSET"}, {"amount", "AMOUNT"}, {"bill_no", "BILL"}}, rows,
                   "entry");
      return Exit::ok;
    };
  });
}

}  // namespace rc::cli
