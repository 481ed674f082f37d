#include "core/engine/risk.hpp"

namespace rc::engine {

Reason risk_rejection(const ActivityGate& a) {
  if (a.blacklisted) return Reason::blacklisted;
  if (a.fuse_tripped) return Reason::held_by_fuse;
  return Reason::none;
}

std::set<int64_t> blocked_prizes(store::Session& s, const ActivityGate& a) {
  std::set<int64_t> out;
  if (!a.has_blocked_prizes) return out;
  auto b = s.query("SELECT id FROM prize WHERE activity_id = $1 AND blocked = 1", {a.id});
  for (auto& row : b.rows) out.insert(row.i64(0));
  return out;
}

}  // namespace rc::engine
