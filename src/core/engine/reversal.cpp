#include "core/engine/reversal.hpp"

#include <nlohmann/json.hpp>

#include "core/audit.hpp"
#include "core/engine/ledger.hpp"
#include "core/engine/release.hpp"

namespace rc::engine {

ReverseOutcome reverse(store::Store& st, const std::string& record_code, const std::string& reason,
                       const std::optional<std::string>& request_id, const std::string& actor, Millis now,
                       bool dry_run, bool downstream_reversed) {
  ReverseOutcome out;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    out = ReverseOutcome{};
    auto g = find_grant(tx, record_code);
    if (!g) throw Error(Errc::not_found, "no grant with record code '" + record_code + "'");
    out.grant = g;
    out.state = name(g->state);
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
    if (g->state != GrantState::success) {
      out.message = "grant " + record_code + " is " + out.state + ": only a successful grant can be reversed; nothing changed";
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
    if (!transition(tx, g->id, GrantState::success, GrantState::reversed, actor, reason, now, "", {}, request_id)) {
      // A concurrent reversal won; with the same request id, that was this request.
      tx.rollback_only();
      if (request_id && !tx.query("SELECT 1 FROM status_log WHERE entity = 'grant' AND entity_id = $1 AND request_id = $2",
                                  {g->id, *request_id}).empty()) {
        out.replayed = true;
        out.message = "request " + *request_id + " was already applied to " + record_code + ": nothing to do";
      } else {
        // Report what it lost to, not the 'success' it read before: a new statement sees the winner.
        out.state = current_state(tx, g->id);
        out.message = "grant " + record_code + " was changed concurrently to " + out.state + ": nothing changed";
      }
      return;
    }
    // limits, budget and stock back (release.hpp)
    give_back(tx, g->id);
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
    out.state = name(GrantState::reversed);
    out.message = "reversed " + record_code + ": stock, limit counts and budget returned";
  });
  if (out.changed) out.grant = find_grant(st.autocommit(), record_code);
  return out;
}

}  // namespace rc::engine
