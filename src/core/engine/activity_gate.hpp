#pragma once
// Rule 2, the activity gate: the activity exists, is live (or gray with the user on its gray list),
// and the server's time is inside its window: from start to the end of end's second
// (core/activity/window.hpp). The same single read also brings what
// the idempotency and risk rules need about this user, so the common claim pays one round trip.
#include <cstdint>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/engine/reason.hpp"
#include "core/states.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// The activity as one claim sees it, read inside the claim's transaction.
struct ActivityGate {
  int64_t id = 0, version = 0;
  ActivityState state = ActivityState::pending_review;
  Millis start_at = 0, end_at = 0;
  bool on_gray_list = false;
  bool blacklisted = false;
  bool fuse_tripped = false;        // an activity-wide fuse is tripped
  bool has_blocked_prizes = false;  // some prize is held by its own fuse
  std::optional<int64_t> replay_grant_id;  // a grant with this biz_id already exists
};

// The activity `code` and this user's standing in it; nullopt when there is no such activity.
std::optional<ActivityGate> read_gate(store::Session& s, const std::string& code, const std::string& user,
                                      const std::string& biz_id);

// Throws store::Retryable (the claim's transaction runs again) when the activity's version is no
// longer `version` (the gate's read): a switch committed between the gate's snapshot and its lock.
// REQUIRES: after read_gate in the same transaction (the lock is held). A no-op on SQLite.
void check_version(store::Session& s, int64_t activity_id, int64_t version);

// Why the gate refuses at `now` (ended, not_live, not_started, paused, not_in_gray_list), or Reason::none.
Reason gate_rejection(const ActivityGate& a, Millis now);

}  // namespace rc::engine
