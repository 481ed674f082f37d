// Step 9, delivery after commit. Only the process that moved the grant to issuing delivers it, and
// the bill number is persisted before any call and reused on every resend, so the downstream can
// dedupe. In-database channels (ledger, outbox) complete inside one transaction. A webhook
// delivery carries a pending resend bill from before the call on, so that a crash during the call
// leaves a due resend with the same bill number rather than a stranded grant.
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/audit.hpp"
#include "core/engine/bill.hpp"
#include "core/engine/deliver_inline.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/ledger.hpp"
#include "core/engine/release.hpp"
#include "core/engine/resend.hpp"

namespace rc::engine {

// What phase 1 of a delivery found and did, for the phases after it.
struct Engine::Phase1 {
  DeliveryOutcome out;
  std::optional<DeliveryTarget> tgt;
  std::string bill, type;
  int timeout_ms = 0;
};

// Phase 1: win the move to issuing and persist the bill number. In-database channels finish here.
// Returns false when the grant is not ours to deliver (the caller rolls back what this wrote).
bool Engine::deliver_phase1(store::Tx& tx, int64_t grant_id, Phase1& p) {
  const Millis now = clock_.now_ms();
  const std::string& actor = opts_.actor;
  DeliveryOutcome& out = p.out;
  std::optional<DeliveryTarget>& tgt = p.tgt;
  std::string& bill = p.bill;
  std::string& type = p.type;
  int& timeout_ms = p.timeout_ms;
  {
    out = DeliveryOutcome{};
    tgt = load_delivery_target(tx, grant_id);
    if (!tgt) throw Error(Exit::internal, "grant " + std::to_string(grant_id) + " not found for delivery");
    out.state = tgt->state;
    std::string from = tgt->state;
    if (from == "issuing") {
      // A delivery that recorded no outcome before its resend fell due crashed or hung past its
      // timeout: take it over (issuing -> delayed_resend -> issuing), with the same bill number.
      if (!resend_due(tx, tgt->id, now) || !transition(tx, "grants", "grant", tgt->id, "issuing", "delayed_resend", actor,
                                     "no outcome recorded before the resend fell due", now))
        return false;
      from = "delayed_resend";
    } else if (from != "init" && from != "delayed_resend") {
      return false;  // delivered, failed, or waiting for an external answer
    }
    auto ch = opts_.channels.find(tgt->channel);
    if (ch == opts_.channels.end())
      throw Error(Exit::config, "grant " + tgt->record_code + " is delivered by channel '" + tgt->channel +
                                    "', which is not configured on this host: add [channels." + tgt->channel + "]");
    type = ch->second.type;
    timeout_ms = ch->second.timeout_ms;
    if (!transition(tx, "grants", "grant", tgt->id, from, "issuing", actor, "deliver via " + tgt->channel, now))
      return false;
    bill = open_bill(tx, *tgt, now);
    out.delivered_now = true;
    out.state = "issuing";
    if (type == "ledger") {
      // Idempotent by bill number (see ledger.hpp).
      std::string asset = ledger_asset(tgt->item_kind, tgt->item);
      ledger_credit(tx, bill, tgt->user, asset, tgt->amount, now);
      transition(tx, "grants", "grant", tgt->id, "issuing", "success", actor, "ledger credited", now);
      close_bill(tx, bill, "success", "0", "credited " + asset, now);
      finish_resend(tx, tgt->id, "done", actor, "ledger credited", now);
      out.state = "success";
      out.outcome = delivery::Outcome::success;
    } else if (type == "outbox") {
      auto body = delivery::WebhookClient::body({tgt->id, bill, tgt->user, tgt->item, tgt->amount});
      tx.exec(
          "INSERT INTO outbox (bill_no, channel, payload, state, created_at, updated_at) VALUES ($1, $2, $3, 'pending', $4, $4) "
          "ON CONFLICT (bill_no) DO NOTHING",
          {bill, tgt->channel, body, now});
      transition(tx, "grants", "grant", tgt->id, "issuing", "awaiting_external", actor, "written to outbox", now);
      close_bill(tx, bill, "awaiting_external", "", "", now);
      out.state = "awaiting_external";
      out.outcome = delivery::Outcome::success;
    } else {
      // webhook: the resend is due only after the call's own timeout has certainly passed
      ensure_resend(tx, *tgt, bill, now + timeout_ms + opts_.resend_first_delay_ms, now + opts_.resend_expiry_ms,
                    actor, now);
    }
  }
  return true;
}

bool Engine::deliver_in(store::Tx& tx, GrantView& g) {
  if (g.state != "init" || g.bill_no) return false;
  auto ch = opts_.channels.find(g.channel);
  if (ch == opts_.channels.end()) return false;
  const std::string& type = ch->second.type;
  if (type != "ledger" && type != "outbox") return false;
  return deliver_inline(tx, type == "ledger" ? InlineChannel::ledger : InlineChannel::outbox, g, opts_.actor,
                        clock_.now_ms())
      .has_value();
}

DeliveryOutcome Engine::deliver(int64_t grant_id) {
  Phase1 p;
  st_.transact(store::TxMode::write, [&](store::Tx& tx) {
    if (!deliver_phase1(tx, grant_id, p)) tx.rollback_only();
  });
  DeliveryOutcome& out = p.out;
  const std::optional<DeliveryTarget>& tgt = p.tgt;
  const std::string& bill = p.bill;
  const std::string& actor = opts_.actor;
  if (!out.delivered_now || p.type != "webhook") return out;

  // Phase 2: the call, outside any transaction. A crash here leaves the grant in issuing with its
  // bill number and a pending resend bill: the resend reuses that number, never a new one.
  delivery::Result res;
  try {
    Hook& h = webhook(tgt->channel);
    std::lock_guard<std::mutex> l(h.mu);
    res = h.client->post({tgt->id, bill, tgt->user, tgt->item, tgt->amount});
  } catch (const Error& e) {
    res = {delivery::Outcome::unknown, "local_error", e.what()};
  }
  out.outcome = res.outcome;
  out.code = res.code;
  out.message = res.message;

  // Phase 3: record the outcome, if the grant is still ours (still issuing).
  const Millis done = clock_.now_ms();
  st_.transact(store::TxMode::write, [&](store::Tx& tx) {
    std::string why = std::string(delivery::outcome_name(res.outcome)) + (res.code.empty() ? "" : " " + res.code) +
                      (res.message.empty() ? "" : ": " + res.message);
    why = why.substr(0, 500);
    std::string to = res.outcome == delivery::Outcome::success  ? "success"
                     : res.outcome == delivery::Outcome::failed ? "failed"
                                                                : "delayed_resend";
    bool moved = to == "failed" ? transition(tx, "grants", "grant", tgt->id, "issuing", to, actor, why, done,
                                             ", reason = $5", {why})
                                : transition(tx, "grants", "grant", tgt->id, "issuing", to, actor, why, done);
    if (!moved) {
      // Someone took the delivery over in the meantime: their outcome stands.
      tx.rollback_only();
      auto now_state = load_delivery_target(tx, tgt->id);
      out.state = now_state ? now_state->state : "";
      return;
    }
    out.state = to;
    if (to == "success") {
      close_bill(tx, bill, "success", res.code, res.message, done);
      finish_resend(tx, tgt->id, "done", actor, why, done);
    } else if (to == "failed") {
      close_bill(tx, bill, "failed", res.code, res.message, done);
      finish_resend(tx, tgt->id, "manual", actor, why, done);
      release_holdings(tx, tgt->id, actor, "final failure: " + why, done);
    } else {
      // retryable or unknown: the same bill number later, with exponential backoff (60 s doubling
      // to 1 h from the first delay, with jitter)
      close_bill(tx, bill, delivery::outcome_name(res.outcome), res.code, res.message, done);
      reschedule_resend(tx, tgt->id, opts_.resend_first_delay_ms, why, done);
    }
  });
  spdlog::info("deliver record={} bill={} channel={} outcome={} code={} state={}", tgt->record_code, bill, tgt->channel,
               delivery::outcome_name(res.outcome), res.code, out.state);
  return out;
}

Engine::Hook& Engine::webhook(const std::string& channel) {
  std::lock_guard<std::mutex> l(mu_);
  auto& slot = webhooks_[channel];
  if (!slot) {
    const auto& cfg = opts_.channels.at(channel);
    std::string secret = resolve_secret(cfg.secret_ref, "channels." + channel + ".secret", opts_.getenv);
    auto h = std::make_unique<Hook>();
    h->client = std::make_unique<delivery::WebhookClient>(cfg, secret);
    slot = std::move(h);
  }
  return *slot;
}

}  // namespace rc::engine
