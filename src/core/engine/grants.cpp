// After the claim: reversal (success -> reversed, returning what the grant took) and the external
// system's answer for outbox deliveries.
#include <nlohmann/json.hpp>

#include "core/audit.hpp"
#include "core/engine/internal.hpp"

namespace rc::engine {

ReverseOutcome reverse(store::Store& st, const std::string& record_code, const std::string& reason,
                       const std::optional<std::string>& request_id, const std::string& actor, Millis now,
                       bool dry_run, bool downstream_reversed) {
  ReverseOutcome out;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    out = ReverseOutcome{};
    auto g = find_grant(tx, record_code);
    if (!g) throw Error(Exit::data, "no grant with record code '" + record_code + "'");
    out.grant = g;
    out.state = g->state;
    if (request_id) {
      auto seen = tx.query(
          "SELECT to_state FROM status_log WHERE entity = 'grant' AND entity_id = $1 AND request_id = $2",
          {g->id, *request_id});
      if (!seen.empty()) {
        out.replayed = true;
        out.message = "request " + *request_id + " was already applied to " + record_code + ": nothing to do";
        tx.rollback_only();
        return;
      }
    }
    if (g->state != "success") {
      out.message = "grant " + record_code + " is " + g->state + ": only a successful grant can be reversed; nothing changed";
      tx.rollback_only();
      return;
    }
    if (dry_run) {
      out.message = "would reverse " + record_code + " (" + std::to_string(g->amount) + " of " + g->item + ")";
      tx.rollback_only();
      return;
    }
    // Money delivered outside this database is not taken back by us: returning the budget while the
    // downstream keeps the payment would let the activity spend it twice.
    store::Result credit;
    if (g->bill_no)
      credit = tx.query("SELECT user_id, asset, amount FROM ledger_entry WHERE bill_no = $1 AND kind = 'credit'",
                        {*g->bill_no});
    if (credit.empty() && !downstream_reversed) {
      out.message = "grant " + record_code + " was delivered through channel '" + g->channel +
                    "': reverse it there first, then rerun with --downstream-reversed; nothing changed";
      tx.rollback_only();
      return;
    }
    if (!transition(tx, "grants", "grant", g->id, "success", "reversed", actor, reason, now, "", {}, request_id)) {
      // A concurrent reversal won; with the same request id, that was this request.
      tx.rollback_only();
      if (request_id && !tx.query("SELECT 1 FROM status_log WHERE entity = 'grant' AND entity_id = $1 AND request_id = $2",
                                  {g->id, *request_id}).empty()) {
        out.replayed = true;
        out.message = "request " + *request_id + " was already applied to " + record_code + ": nothing to do";
      } else {
        out.message = "grant " + record_code + " changed concurrently: nothing changed";
      }
      return;
    }
    auto info = tx.query(
        "SELECT g.activity_id, g.prize_id, g.bucket, a.timezone, a.user_limit_period, p.user_limit_period, "
        "a.user_limit, p.user_limit, p.buckets FROM grants g JOIN activity a ON a.id = g.activity_id "
        "JOIN prize p ON p.id = g.prize_id WHERE g.id = $1",
        {g->id});
    const auto& x = info[0];
    int64_t activity_id = x.i64(0), prize_id = x.i64(1);
    int64_t bucket = x.is_null(2) ? preferred_bucket(g->user, x.i64(8)) : x.i64(2);
    std::string tz = x.str(3);
    // Returned in the order a claim takes them (limits, budget, stock last): no lock-order deadlock.
    // The limit counts of the period the grant was made in (not today's).
    if (!x.is_null(6)) {
      auto per = parse_period(x.str_or(4, "total")).value_or(Period::total);
      tx.exec("UPDATE limit_counter SET used = used - 1 WHERE scope = $1 AND user_id = $2 AND period_key = $3 AND used > 0",
              {scope_activity(activity_id), g->user, period_key(per, g->created_at, tz)});
    }
    if (!x.is_null(7)) {
      auto per = parse_period(x.str_or(5, "total")).value_or(Period::total);
      tx.exec("UPDATE limit_counter SET used = used - 1 WHERE scope = $1 AND user_id = $2 AND period_key = $3 AND used > 0",
              {scope_prize(prize_id), g->user, period_key(per, g->created_at, tz)});
    }
    if (g->cost_cents > 0)
      tx.exec("UPDATE budget SET consumed_cents = consumed_cents - $2 WHERE activity_id = $1 AND consumed_cents >= $2",
              {activity_id, g->cost_cents});
    // Stock back to the bucket it came from.
    tx.exec("UPDATE stock SET remain = remain + 1 WHERE prize_id = $1 AND bucket = $2", {prize_id, bucket});
    // A ledger credit is debited once: the unique (bill_no, kind) key makes a second debit impossible.
    if (g->bill_no) {
      if (!credit.empty()) {
        int64_t n = tx.exec(
            "INSERT INTO ledger_entry (bill_no, kind, user_id, asset, amount, created_at) VALUES ($1, 'reverse', $2, $3, $4, $5) "
            "ON CONFLICT (bill_no, kind) DO NOTHING",
            {*g->bill_no, credit[0].str(0), credit[0].str(1), -credit[0].i64(2), now});
        if (n == 1)
          tx.exec("UPDATE ledger_account SET balance = balance - $3, updated_at = $4 WHERE user_id = $1 AND asset = $2",
                  {credit[0].str(0), credit[0].str(1), credit[0].i64(2), now});
      }
    }
    audit(tx, actor, "grant.reverse", "grant", record_code,
          nlohmann::json{{"reason", reason},
                         {"request_id", request_id.value_or("")},
                         {"amount", g->amount},
                         {"channel", g->channel},
                         {"downstream_reversed", downstream_reversed}}
              .dump(),
          now);
    out.changed = true;
    out.state = "reversed";
    out.message = "reversed " + record_code + ": stock, limit counts and budget returned";
  });
  if (out.changed) out.grant = find_grant(st.autocommit(), record_code);
  return out;
}

CompleteOutcome complete(store::Store& st, const std::string& bill_no, bool ok, const std::optional<std::string>& reason,
                         const std::string& actor, Millis now, bool dry_run) {
  CompleteOutcome out;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    out = CompleteOutcome{};
    // delivery_bill.bill_no is the unique key: find the grant through it
    auto r = tx.query(std::string(kGrantSelect) + "WHERE g.id = (SELECT grant_id FROM delivery_bill WHERE bill_no = $1)",
                      {bill_no});
    if (r.empty()) throw Error(Exit::data, "no grant with bill number '" + bill_no + "'");
    auto g = to_view(r[0]);
    out.grant = g;
    out.state = g.state;
    const std::string to = ok ? "success" : "failed";
    if (g.state != "awaiting_external") {
      out.message = "grant " + g.record_code + " is " + g.state + ": only awaiting_external can be completed; nothing changed";
      tx.rollback_only();
      return;
    }
    if (dry_run) {
      out.message = "would move " + g.record_code + " from awaiting_external to " + to;
      tx.rollback_only();
      return;
    }
    std::string why = ok ? "external system confirmed" : reason.value_or("external system failed");
    if (!transition(tx, "grants", "grant", g.id, "awaiting_external", to, actor, why, now,
                    ok ? "" : ", reason = $5", ok ? store::Params{} : store::Params{why})) {
      out.message = "grant " + g.record_code + " changed concurrently: nothing changed";
      tx.rollback_only();
      return;
    }
    tx.exec("UPDATE outbox SET state = $2, updated_at = $3 WHERE bill_no = $1", {bill_no, ok ? "done" : "failed", now});
    tx.exec("UPDATE delivery_bill SET state = $2, last_message = $3, updated_at = $4 WHERE bill_no = $1",
            {bill_no, to, why, now});
    audit(tx, actor, "grant.complete", "grant", g.record_code, nlohmann::json{{"bill_no", bill_no}, {"ok", ok}, {"reason", why}}.dump(), now);
    out.changed = true;
    out.state = to;
    out.message = "grant " + g.record_code + " is now " + to;
  });
  if (out.changed) {
    auto r = st.autocommit().query(
        std::string(kGrantSelect) + "WHERE g.id = (SELECT grant_id FROM delivery_bill WHERE bill_no = $1)", {bill_no});
    if (!r.empty()) out.grant = to_view(r[0]);
  }
  return out;
}

}  // namespace rc::engine
