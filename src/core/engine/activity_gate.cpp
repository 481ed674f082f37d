#include "core/engine/activity_gate.hpp"

#include "core/activity/versions.hpp"
#include "core/activity/window.hpp"

namespace rc::engine {

std::optional<ActivityGate> read_gate(store::Session& s, const std::string& code, const std::string& user,
                                      const std::string& biz_id) {
  // PostgreSQL: the activity's claim lock, shared, held to the commit: a version switch waits for
  // this claim, and this claim's later statements see any switch that committed before it got the
  // lock (activity/version_switch.cpp; check_version below catches a gate read older than that).
  static const std::string pg_lock = ", pg_advisory_xact_lock_shared(" + activity::claim_lock_args("a.code") + ")";
  auto r = s.query(
      "SELECT a.id, a.state, a.version, a.start_at, a.end_at, "
      "CASE WHEN EXISTS (SELECT 1 FROM activity_user_list l WHERE l.activity_id = a.id AND l.list = 'gray' "
      "AND l.user_id = $2) THEN 1 ELSE 0 END, "
      "CASE WHEN EXISTS (SELECT 1 FROM activity_user_list l WHERE l.activity_id = a.id AND l.list = 'black' "
      "AND l.user_id = $2) THEN 1 ELSE 0 END, "
      "CASE WHEN EXISTS (SELECT 1 FROM fuse_event f WHERE f.activity_id = a.id AND f.state = 'tripped' "
      "AND f.prize_id IS NULL) THEN 1 ELSE 0 END, "
      "CASE WHEN EXISTS (SELECT 1 FROM prize p WHERE p.activity_id = a.id AND p.blocked = 1) THEN 1 ELSE 0 END, "
      "(SELECT g.id FROM grants g WHERE g.biz_id = $3)" + (s.dialect() == store::Dialect::postgres ? pg_lock : "") +
      " FROM activity a WHERE a.code = $1",
      {code, user, biz_id});
  if (r.empty()) return std::nullopt;
  const auto& x = r[0];
  ActivityGate a;
  a.id = x.i64(0);
  a.state = state_from_db<ActivityState>(x.str(1));
  a.version = x.i64(2);
  a.start_at = x.i64(3);
  a.end_at = x.i64(4);
  a.on_gray_list = x.i64(5) != 0;
  a.blacklisted = x.i64(6) != 0;
  a.fuse_tripped = x.i64(7) != 0;
  a.has_blocked_prizes = x.i64(8) != 0;
  a.replay_grant_id = x.opt_i64(9);
  return a;
}

void check_version(store::Session& s, int64_t activity_id, int64_t version) {
  if (s.dialect() != store::Dialect::postgres) return;  // SQLite: the claim's write transaction excludes a switch
  auto r = s.query("SELECT version FROM activity WHERE id = $1", {activity_id});
  if (r.empty() || r[0].i64(0) != version)
    throw store::Retryable("activity switched to a new version during the claim: the claim runs again under it");
}

Reason gate_rejection(const ActivityGate& a, Millis now) {
  using S = ActivityState;
  if (a.state == S::ended) return Reason::ended;
  if (a.state != S::live && a.state != S::gray && a.state != S::paused) return Reason::not_live;
  switch (activity::window_position(now, a.start_at, a.end_at)) {
    case activity::WindowPos::before: return Reason::not_started;
    case activity::WindowPos::after: return Reason::ended;
    case activity::WindowPos::inside: break;
  }
  if (a.state == S::paused) return Reason::paused;
  if (a.state == S::gray && !a.on_gray_list) return Reason::not_in_gray_list;
  return Reason::none;
}

}  // namespace rc::engine
