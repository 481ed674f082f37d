// resend (the job) | resend list | resend retry | resend abandon
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/engine_setup.hpp"
#include "core/states.hpp"
#include "cli/job_common.hpp"
#include "jobs/resend/resend.hpp"

namespace rc::cli {

namespace {

struct {
  JobFlags job;
  int64_t chunk = 100;
  std::string init_grace = "5m", expiry = "5d";
  double rate = 0;
  std::string state, activity, bill, reason;
  int64_t limit = 100;
  bool dry_run = false, yes = false;
} resend_opt;

json bill_json(const jobs::ResendBill& b) {
  return {{"bill_no", b.bill_no},
          {"record_code", b.record_code},
          {"activity", b.activity},
          {"user", b.user},
          {"state", b.state},
          {"grant_state", b.grant_state},
          {"channel", b.channel},
          {"attempts", b.attempts},
          {"next_attempt_at", format_utc(b.next_attempt_at)},
          {"expires_at", format_utc(b.expires_at)},
          {"last_error", b.last_error ? json(*b.last_error) : json(nullptr)}};
}

Exit report_change(Ctx& ctx, const jobs::ResendChange& c) {
  json j{{"bill_no", resend_opt.bill}, {"changed", c.changed}, {"dry_run", resend_opt.dry_run}, {"message", c.message}};
  if (c.bill) {
    j["state"] = c.bill->state;
    j["grant_state"] = c.bill->grant_state;
    j["record_code"] = c.bill->record_code;
  }
  ctx.out.record(j);
  if (!c.changed) spdlog::error("{}", c.message);
  return c.changed ? Exit::ok : Exit::findings;
}

}  // namespace

void register_resend(CLI::App& app, Ctx& ctx) {
  auto* rs = app.add_subcommand(
      "resend", "Job: redeliver due resend bills and grants stranded in init, with the same bill number; "
                "and the operator's list, retry, abandon");
  add_job_options(rs, resend_opt.job);
  rs->add_option("--chunk-size", resend_opt.chunk, "Bills claimed per transaction (default 100)")->check(CLI::Range(1, 10000));
  rs->add_option("--init-grace", resend_opt.init_grace, "A grant in init this long is stranded and delivered (default 5m)");
  rs->add_option("--rate", resend_opt.rate, "At most this many delivery calls per second per channel (default: no cap)")
      ->check(CLI::Range(0.0, 100000.0));

  auto* list = rs->add_subcommand("list", "Resend bills, next due first");
  list->add_option("--state", resend_opt.state, "pending, manual or done (default all)")
      ->check(CLI::IsMember(all_names<ResendState>()));
  list->add_option("--activity", resend_opt.activity, "Only this activity");
  list->add_option("--limit", resend_opt.limit, "At most N bills (default 100)")->check(CLI::Range(1, 1000000));
  list->callback([&ctx] {
    ctx.action = [&ctx] {
      check_text(resend_opt.activity, "--activity", kMaxNameBytes, false);
      auto st = ctx.open_store();
      std::vector<json> rows;
      for (auto& b : jobs::list_resend(*st, resend_opt.state, resend_opt.activity, resend_opt.limit)) rows.push_back(bill_json(b));
      ctx.out.rows({{"bill_no", "BILL"}, {"record_code", "RECORD"}, {"activity", "ACTIVITY"}, {"state", "STATE"},
                    {"grant_state", "GRANT"}, {"attempts", "ATTEMPTS"}, {"next_attempt_at", "NEXT"},
                    {"expires_at", "EXPIRES"}, {"last_error", "LAST ERROR"}},
                   rows, "resend_bill");
      return Exit::ok;
    };
  });
  auto* retry = rs->add_subcommand("retry", "Make a bill due now: manual -> pending, with a fresh expiry");
  retry->add_option("BILL", resend_opt.bill, "Bill number")->required();
  retry->add_flag("--dry-run", resend_opt.dry_run, "Check and report; change nothing");
  retry->callback([&ctx] {
    ctx.action = [&ctx] {
      check_text(resend_opt.bill, "BILL", kMaxNameBytes, true);
      auto st = ctx.open_store();
      return report_change(ctx, jobs::retry_resend(*st, resend_opt.bill, ctx.settings.operator_name, ctx.now(),
                                                   engine_options(ctx).resend_expiry_ms, resend_opt.dry_run));
    };
  });
  auto* ab = rs->add_subcommand("abandon",
                                "Give up a delivery: its grant -> failed, and its stock, budget and limit counts "
                                "released exactly once");
  ab->add_option("BILL", resend_opt.bill, "Bill number")->required();
  ab->add_option("--reason", resend_opt.reason, "Why (recorded)")->required();
  ab->add_flag("--dry-run", resend_opt.dry_run, "Check and report; change nothing");
  ab->add_flag("-y,--yes", resend_opt.yes, "Do not ask for confirmation (needed without a terminal)");
  ab->callback([&ctx] {
    ctx.action = [&ctx] {
      check_text(resend_opt.bill, "BILL", kMaxNameBytes, true);
      check_text(resend_opt.reason, "--reason", kMaxReasonBytes, true);
      confirm_irreversible(resend_opt.yes || resend_opt.dry_run, "resend abandon",
                           "Abandon bill " + resend_opt.bill + "? Its grant fails and its stock, budget and limit counts "
                           "are released; this cannot be undone.");
      auto st = ctx.open_store();
      return report_change(ctx, jobs::abandon_resend(*st, resend_opt.bill, resend_opt.reason, ctx.settings.operator_name, ctx.now(),
                                                     resend_opt.dry_run));
    };
  });

  rs->callback([&ctx, list, retry, ab] {
    if (list->parsed() || retry->parsed() || ab->parsed()) return;
    ctx.action = [&ctx] {
      jobs::ResendOptions ro;
      ro.chunk = resend_opt.chunk;
      ro.init_grace_ms = jobs::parse_duration_ms(resend_opt.init_grace, "--init-grace");
      ro.rate_per_second = resend_opt.rate;
      return run_job_command(ctx, "resend", resend_opt.job, [&ctx, ro](jobs::JobRun& run) {
        engine::Engine eng(run.store(), run.clock(), engine_options(ctx));
        jobs::resend(run, eng, ro);
      });
    };
  });
}

}  // namespace rc::cli
