#include "core/engine/reversal.hpp"

#include <nlohmann/json.hpp>

#include "core/audit.hpp"
#include "core/engine/budget.hpp"
#include "core/engine/ledger.hpp"
#include "core/engine/limits.hpp"
#include "core/engine/stock.hpp"

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
    std::optional<LedgerCredit> credit;
    if (g->bill_no) credit = find_ledger_credit(tx, *g->bill_no);
    if (!credit && !downstream_reversed) {
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
      return_limit(tx, scope_activity(activity_id), g->user, period_key(per, g->created_at, tz));
    }
    if (!x.is_null(7)) {
      auto per = parse_period(x.str_or(5, "total")).value_or(Period::total);
      return_limit(tx, scope_prize(prize_id), g->user, period_key(per, g->created_at, tz));
    }
    if (g->cost_cents > 0) return_budget(tx, activity_id, g->cost_cents);
    return_stock(tx, prize_id, bucket);
    // A ledger credit is debited once (ledger_debit is idempotent by bill number).
    if (g->bill_no && credit) ledger_debit(tx, *g->bill_no, *credit, now);
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

}  // namespace rc::engine
