// The review and control transitions of an activity. Each decides its winner with one conditional
// UPDATE (affected rows), writes the status-log row in the same transaction, and reports an illegal
// transition as "nothing changed" naming the current state, so a script can tell.
#include <nlohmann/json.hpp>

#include "core/activity/activity.hpp"
#include "core/activity/versions.hpp"
#include "core/activity/window.hpp"
#include "core/audit.hpp"

namespace rc::activity {

const char* role_name(Role r) { return r == Role::product ? "product" : "tech"; }

const char* op_name(Op op) {
  switch (op) {
    case Op::publish_gray: return "publish --gray";
    case Op::publish_full: return "publish --full";
    case Op::pause: return "pause";
    case Op::resume: return "resume";
    case Op::offline: return "offline";
  }
  return "?";
}

namespace {

TransitionResult refused(const ActivityRow& a, const std::string& what, const std::string& allowed) {
  TransitionResult r;
  r.code = a.code;
  r.from = name(a.state);
  r.to = r.from;
  r.message = "activity '" + a.code + "' is " + r.from + ": cannot " + what + " (allowed from " + allowed +
              "); nothing changed";
  return r;
}

TransitionResult moved(const ActivityRow& a, ActivityState to, bool dry) {
  TransitionResult r;
  r.code = a.code;
  r.from = name(a.state);
  r.to = name(to);
  r.changed = !dry;
  r.dry_run = dry;
  r.message = std::string(dry ? "would move" : "moved") + " activity '" + a.code + "' from " + r.from + " to " + r.to;
  return r;
}

// The state a paused activity came from: the from_state of its latest move to paused.
ActivityState paused_from(store::Session& s, int64_t id) {
  auto r = s.query(
      "SELECT from_state FROM status_log WHERE entity = 'activity' AND entity_id = $1 AND to_state = 'paused' "
      "ORDER BY id DESC LIMIT 1",
      {id});
  return r.empty() || r[0].is_null(0) ? ActivityState::live : state_from_db<ActivityState>(r[0].str(0));
}

}  // namespace

TransitionResult approve(store::Store& st, const std::string& code, Role role, const std::optional<std::string>& comment,
                         const ReviewPolicy& pol, const Actor& who, Millis now) {
  TransitionResult res;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    auto a = get(tx, code);
    if (is_running(a.state)) {  // the review of a new version (versions.hpp)
      res = approve_version(tx, a, role, comment, pol, who, now);
      return;
    }
    using S = ActivityState;
    const S expected = role == Role::product ? S::pending_review : S::product_approved;
    const S to = role == Role::product ? S::product_approved : S::approved;
    if (a.state != expected) {
      std::string hint = role == Role::tech && a.state == S::pending_review ? " (product approves first)" : "";
      res = refused(a, std::string("approve as ") + role_name(role) + hint, name(expected));
      tx.rollback_only();
      return;
    }
    if (who.name == a.created_by)
      throw Error(Errc::not_permitted, "rule creator_may_not_approve: " + who.name + " created activity '" + code +
                                           "' and may not approve it");
    if (pol.distinct_approvers && role == Role::tech) {
      auto r = tx.query(
          "SELECT operator FROM activity_review WHERE activity_id = $1 AND role = 'product' AND decision = 'approve' "
          "AND voided = 0 AND definition_hash = $2 ORDER BY id DESC LIMIT 1",
          {a.id, a.definition_hash});
      if (!r.empty() && r[0].str(0) == who.name)
        throw Error(Errc::not_permitted, "rule distinct_approvers: " + who.name +
                                             " already approved as product; the tech approver must be someone else "
                                             "(config review.distinct_approvers)");
    }
    res = moved(a, to, who.dry_run);
    if (who.dry_run) {
      tx.rollback_only();
      return;
    }
    if (!transition(tx, a.id, expected, to, who.name,
                    std::string("approved as ") + role_name(role), now)) {
      // A concurrent approval won: report the state it left, change nothing.
      tx.rollback_only();
      auto now_state = get(tx, code);
      res = refused(now_state, std::string("approve as ") + role_name(role), name(expected));
      return;
    }
    tx.exec(
        "INSERT INTO activity_review (activity_id, role, decision, operator, definition_hash, comment, created_at, "
        "version) VALUES ($1, $2, 'approve', $3, $4, $5, $6, $7)",
        {a.id, std::string(role_name(role)), who.name, a.definition_hash, store::opt(comment), now, a.version});
    audit(tx, who.name, "activity.approve", "activity", code,
          nlohmann::json{{"role", role_name(role)}, {"hash", a.definition_hash}, {"comment", comment.value_or("")}}.dump(),
          now);
  });
  return res;
}

TransitionResult reject(store::Store& st, const std::string& code, Role role, const std::string& reason,
                        const Actor& who, Millis now) {
  TransitionResult res;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    auto a = get(tx, code);
    if (is_running(a.state)) {  // the review of a new version (versions.hpp)
      res = reject_version(tx, a, role, reason, who, now);
      return;
    }
    if (a.state != ActivityState::pending_review && a.state != ActivityState::product_approved) {
      res = refused(a, "reject", "pending_review, product_approved");
      tx.rollback_only();
      return;
    }
    res = moved(a, ActivityState::rejected, who.dry_run);
    if (who.dry_run) {
      tx.rollback_only();
      return;
    }
    if (!transition(tx, a.id, a.state, ActivityState::rejected, who.name, reason, now)) {
      tx.rollback_only();
      res = refused(get(tx, code), "reject", "pending_review, product_approved");
      return;
    }
    tx.exec(
        "INSERT INTO activity_review (activity_id, role, decision, operator, definition_hash, comment, created_at, "
        "version) VALUES ($1, $2, 'reject', $3, $4, $5, $6, $7)",
        {a.id, std::string(role_name(role)), who.name, a.definition_hash, reason, now, a.version});
    audit(tx, who.name, "activity.reject", "activity", code,
          nlohmann::json{{"role", role_name(role)}, {"reason", reason}}.dump(), now);
  });
  return res;
}

TransitionResult control(store::Store& st, const std::string& code, Op op, const std::optional<std::string>& reason,
                         const Actor& who, Millis now) {
  TransitionResult res;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    auto a = get(tx, code);
    using S = ActivityState;
    S to = a.state;
    std::string allowed;
    bool ok = false;
    switch (op) {
      case Op::publish_gray:
        to = S::gray, allowed = "approved", ok = a.state == S::approved;
        break;
      case Op::publish_full:
        to = S::live, allowed = "approved, gray", ok = a.state == S::approved || a.state == S::gray;
        break;
      case Op::pause:
        to = S::paused, allowed = "gray, live", ok = a.state == S::gray || a.state == S::live;
        break;
      case Op::resume:
        allowed = "paused", ok = a.state == S::paused;
        if (ok) to = paused_from(tx, a.id);
        break;
      case Op::offline:
        to = S::offline, allowed = "any state but ended, offline, rejected", ok = !is_final(a.state);
        break;
    }
    if (!ok) {
      res = refused(a, op_name(op), allowed);
      tx.rollback_only();
      return;
    }
    if ((op == Op::publish_gray || op == Op::publish_full || op == Op::resume) &&
        now >= window_close(a.end_at)) {
      res = refused(a, std::string(op_name(op)) + " after the window ended at " + format_utc(a.end_at), allowed);
      tx.rollback_only();
      return;
    }
    res = moved(a, to, who.dry_run);
    if (who.dry_run) {
      tx.rollback_only();
      return;
    }
    std::string why = reason.value_or(op_name(op));
    if (!transition(tx, a.id, a.state, to, who.name, why, now)) {
      tx.rollback_only();
      res = refused(get(tx, code), op_name(op), allowed);
      return;
    }
    audit(tx, who.name, std::string("activity.") + (op == Op::publish_gray || op == Op::publish_full ? "publish" : op_name(op)),
          "activity", code, nlohmann::json{{"from", a.state}, {"to", to}, {"reason", reason.value_or("")}}.dump(), now);
  });
  return res;
}

}  // namespace rc::activity
