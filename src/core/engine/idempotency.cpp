#include "core/engine/idempotency.hpp"

namespace rc::engine {

bool twin_committed(store::Session& s, const std::string& biz_id, int64_t own_grant_id) {
  return !s.query("SELECT 1 FROM grants WHERE biz_id = $1 AND id <> $2", {biz_id, own_grant_id}).empty();
}

void answer_replay(const ClaimRequest& r, const GrantView& g, ClaimOutcome& out) {
  if (g.user == r.user && g.activity == r.activity) {
    // a request still held by a fuse answers held, as the first time
    const bool held = g.state == GrantState::pending && g.reason && *g.reason == name(Reason::held_by_fuse);
    out.status = held ? Status::held : Status::replayed;
    if (held) out.reason = Reason::held_by_fuse;
    out.grant = g;
  } else {
    out.status = Status::rejected;
    out.reason = Reason::biz_id_conflict;
  }
}

}  // namespace rc::engine
