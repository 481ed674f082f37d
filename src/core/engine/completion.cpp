// The external system's answer for an outbox delivery.
#include "core/engine/completion.hpp"

#include <nlohmann/json.hpp>

#include "core/audit.hpp"
#include "core/engine/release.hpp"

namespace rc::engine {

CompleteOutcome complete(store::Store& st, const std::string& bill_no, bool ok, const std::optional<std::string>& reason,
                         const std::string& actor, Millis now, bool dry_run) {
  CompleteOutcome out;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    out = CompleteOutcome{};
    auto found = find_grant_by_bill(tx, bill_no);
    if (!found) throw Error(Errc::not_found, "no grant with bill number '" + bill_no + "'");
    const GrantView& g = *found;
    out.grant = g;
    out.state = name(g.state);
    const GrantState to = ok ? GrantState::success : GrantState::failed;
    if (g.state != GrantState::awaiting_external) {
      out.message = "grant " + g.record_code + " is " + out.state + ": only awaiting_external can be completed; nothing changed";
      tx.rollback_only();
      return;
    }
    if (dry_run) {
      out.message = "would move " + g.record_code + " from awaiting_external to " + name(to);
      tx.rollback_only();
      return;
    }
    std::string why = ok ? "external system confirmed" : reason.value_or("external system failed");
    if (!transition(tx, g.id, GrantState::awaiting_external, to, actor, why, now,
                    ok ? "" : ", reason = $5", ok ? store::Params{} : store::Params{why})) {
      out.state = current_state(tx, g.id);
      out.message = "grant " + g.record_code + " was changed concurrently to " + out.state + ": nothing changed";
      tx.rollback_only();
      return;
    }
    tx.exec("UPDATE outbox SET state = $2, updated_at = $3 WHERE bill_no = $1", {bill_no, name(ok ? OutboxState::done : OutboxState::failed), now});
    if (!ok) release_holdings(tx, g.id, actor, "external system failed: " + why, now);
    tx.exec("UPDATE delivery_bill SET state = $2, last_message = $3, updated_at = $4 WHERE bill_no = $1",
            {bill_no, name(ok ? BillState::success : BillState::failed), why, now});
    audit(tx, actor, "grant.complete", "grant", g.record_code, nlohmann::json{{"bill_no", bill_no}, {"ok", ok}, {"reason", why}}.dump(), now);
    out.changed = true;
    out.state = name(to);
    out.message = "grant " + g.record_code + " is now " + out.state;
  });
  if (out.changed) {
    if (auto g = find_grant_by_bill(st.autocommit(), bill_no)) out.grant = g;
  }
  return out;
}

}  // namespace rc::engine
