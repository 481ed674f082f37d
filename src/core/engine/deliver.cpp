// Step 9, delivery after commit. Only the process that moved the grant to issuing delivers it, and
// the bill number is persisted before any call and reused on every resend, so the downstream can
// dedupe. In-database channels (ledger, outbox) complete inside one transaction. A remote channel's
// (webhook's) delivery carries a pending resend bill from before the call on, so that a crash during the call
// leaves a due resend with the same bill number rather than a stranded grant.
#include <spdlog/spdlog.h>

#include "core/audit.hpp"
#include "core/engine/bill.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/release.hpp"
#include "core/engine/resend.hpp"

namespace rc::engine {

// What phase 1 of a delivery found and did, for the phases after it.
struct Engine::Phase1 {
  DeliveryOutcome out;
  std::optional<DeliveryTarget> tgt;
  std::string bill;
  Channel* ch = nullptr;  // the grant's channel
};

// Phase 1: win the move to issuing and persist the bill number. In-database channels finish here.
// Returns false when the grant is not ours to deliver (the caller rolls back what this wrote).
bool Engine::deliver_phase1(store::Tx& tx, int64_t grant_id, Phase1& p) {
  const Millis now = clock_.now_ms();
  const std::string& actor = opts_.actor;
  DeliveryOutcome& out = p.out;
  std::optional<DeliveryTarget>& tgt = p.tgt;
  std::string& bill = p.bill;
  {
    out = DeliveryOutcome{};
    tgt = load_delivery_target(tx, grant_id);
    if (!tgt) throw Error(Errc::internal, "grant " + std::to_string(grant_id) + " not found for delivery");
    out.state = tgt->state;
    GrantState from = tgt->state;
    if (from == GrantState::issuing) {
      // A delivery that recorded no outcome before its resend fell due crashed or hung past its
      // timeout: take it over (issuing -> delayed_resend -> issuing), with the same bill number.
      if (!resend_due(tx, tgt->id, now) || !transition(tx, tgt->id, GrantState::issuing, GrantState::delayed_resend,
                                                       actor, "no outcome recorded before the resend fell due", now))
        return false;
      from = GrantState::delayed_resend;
    } else if (from != GrantState::init && from != GrantState::delayed_resend) {
      return false;  // delivered, failed, or waiting for an external answer
    }
    p.ch = channel(tgt->channel);
    if (!p.ch)
      throw Error(Errc::config, "grant " + tgt->record_code + " is delivered by channel '" + tgt->channel +
                                    "', which is not configured on this host: add [channels." + tgt->channel + "]");
    if (!transition(tx, tgt->id, from, GrantState::issuing, actor, "deliver via " + tgt->channel, now))
      return false;
    bill = open_bill(tx, *tgt, now);
    out.delivered_now = true;
    out.state = GrantState::issuing;
    if (p.ch->in_database()) {
      // the channel's rows, idempotent by bill number, then the move the channel names
      const Completion c = p.ch->complete(tx, *tgt, bill, now);
      const bool success = c.state == GrantState::success;
      transition(tx, tgt->id, GrantState::issuing, c.state, actor, c.why, now);
      close_bill(tx, bill, success ? BillState::success : BillState::awaiting_external, c.code, c.message, now);
      if (success) finish_resend(tx, tgt->id, ResendState::done, actor, c.why, now);
      out.state = c.state;
      out.outcome = delivery::Outcome::success;
    } else {
      // remote: the resend is due only after the call's own timeout has certainly passed
      ensure_resend(tx, *tgt, bill, now + p.ch->timeout_ms() + opts_.resend_first_delay_ms,
                    now + opts_.resend_expiry_ms, actor, now);
    }
  }
  return true;
}

bool Engine::deliver_in(store::Tx& tx, GrantView& g) {
  if (g.state != GrantState::init || g.bill_no || !opts_.channels.count(g.channel)) return false;
  Channel* ch = channel(g.channel);
  if (!ch->in_database()) return false;
  return ch->deliver_from_init(tx, g, opts_.actor, clock_.now_ms()).has_value();
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
  if (!out.delivered_now || p.ch->in_database()) return out;

  // Phase 2: the call, outside any transaction. A crash here leaves the grant in issuing with its
  // bill number and a pending resend bill: the resend reuses that number, never a new one.
  delivery::Result res;
  try {
    res = p.ch->call({tgt->id, bill, tgt->user, tgt->item, tgt->amount});
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
    const GrantState to = res.outcome == delivery::Outcome::success  ? GrantState::success
                          : res.outcome == delivery::Outcome::failed ? GrantState::failed
                                                                     : GrantState::delayed_resend;
    bool moved = to == GrantState::failed
                     ? transition(tx, tgt->id, GrantState::issuing, to, actor, why, done, ", reason = $5", {why})
                     : transition(tx, tgt->id, GrantState::issuing, to, actor, why, done);
    if (!moved) {
      // Someone took the delivery over in the meantime: their outcome stands.
      tx.rollback_only();
      auto now_state = load_delivery_target(tx, tgt->id);
      if (now_state) out.state = now_state->state;  // grants are never deleted
      return;
    }
    out.state = to;
    if (to == GrantState::success) {
      close_bill(tx, bill, BillState::success, res.code, res.message, done);
      finish_resend(tx, tgt->id, ResendState::done, actor, why, done);
    } else if (to == GrantState::failed) {
      close_bill(tx, bill, BillState::failed, res.code, res.message, done);
      finish_resend(tx, tgt->id, ResendState::manual, actor, why, done);
      release_holdings(tx, tgt->id, actor, "final failure: " + why, done);
    } else {
      // retryable or unknown: the same bill number later, with exponential backoff (60 s doubling
      // to 1 h from the first delay, with jitter)
      close_bill(tx, bill, res.outcome == delivery::Outcome::retryable ? BillState::retryable : BillState::unknown,
                 res.code, res.message, done);
      reschedule_resend(tx, tgt->id, opts_.resend_first_delay_ms, why, done);
    }
  });
  spdlog::info("deliver record={} bill={} channel={} outcome={} code={} state={}", tgt->record_code, bill, tgt->channel,
               delivery::outcome_name(res.outcome), res.code, name(out.state));
  return out;
}

Channel* Engine::channel(const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  auto& slot = built_channels_[name];
  if (!slot) {
    auto cfg = opts_.channels.find(name);
    if (cfg == opts_.channels.end()) return nullptr;
    slot = opts_.make_channel(cfg->second, opts_.getenv);
  }
  return slot.get();
}

}  // namespace rc::engine
