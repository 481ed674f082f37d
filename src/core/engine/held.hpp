#pragma once
// Held requests, not lost requests (rule 4, the fuse). While a fuse event blocks a prize or a whole
// activity, a claim that the fuse stops is recorded as a grant in state `pending` with reason
// `held_by_fuse` and the event's id on it (grants.fuse_event_id). It has taken nothing: no stock,
// no budget, no limit count, no qualification, and it has no amount yet. A lottery request keeps
// the draw it made (draw_value, pool_version), which its release keeps under the same version. The
// answer is `held` with its record code; a retry with the same biz_id returns the same held grant
// (rule 1).
//
// The operator decides per event (jobs/fuse/fuse.hpp):
//   release (false alarm)  each held grant goes through the common flow again (activity, qualification,
//                          limit, selection, budget, stock: steps 2-8, the same code as a claim) inside
//                          one transaction that also moves it pending -> init, then it is delivered;
//                          when the world changed meanwhile it goes pending -> invalid with the reason
//                          (sold_out, limit_reached, ended, ...); when another open event still blocks
//                          it, it stays pending and is handed to that event; when the fuse that
//                          stopped it was released again meanwhile, it runs the flow again;
//   confirm (real incident) pending -> cancelled with the operator's reason.
// Every move is one conditional UPDATE ... WHERE state = 'pending' plus its status-log row in one
// transaction, so two releases (or a release and a confirm) running at once move each grant once.
#include <cstdint>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/engine/engine.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// What became of one held grant.
struct HeldResult {
  std::string record_code;
  std::string result;  // granted | rejected | still_held | cancelled | decided (someone else moved it first)
                       // | would_grant | would_reject (dry run)
  Reason reason = Reason::none;  // rejected, would_reject: the claim's reason; still_held: held_by_fuse
  std::string state;   // the grant's state afterwards
};

// Thrown inside a release's transaction when the held grant is no longer pending: another process
// decided it first. The transaction rolls back; nothing of this attempt survives.
struct HeldGone {};

// The open event that blocks `prize_id` (or, without one, the whole activity) now: an activity-wide
// event first, then the prize's own, oldest first. nullopt when nothing blocks it.
std::optional<int64_t> blocking_event(store::Session& s, int64_t activity_id, std::optional<int64_t> prize_id);

// The one rule for a request the flow refused with held_by_fuse, for Engine::claim, claim_many and
// release_held alike. It is held by the open event that blocks it now (blocking_event: the blocked
// prize's, else the activity's). When none does, the fuse that stopped it was released between the
// flow's look and this one: the flow runs again, never refusing for a hold that is gone - at most
// kHoldReruns times for one request, since fuses can trip and release again in between. Past that
// the caller gives up holding: a claim answers rejected held_by_fuse, a held grant stays held by
// its event for the event's next release.
inline constexpr int kHoldReruns = 2;
struct HoldDecision {
  enum Verdict { hold, run_again, give_up } verdict = give_up;
  int64_t activity_id = 0;  // hold: the activity (0: no such activity)
  int64_t event = 0;        // hold: the event that holds it
};
// `reruns_done`: how many times the flow already ran again for this request (0 after the first run).
// REQUIRES: inside the write transaction that records the hold (blocking_event locks the event).
HoldDecision decide_hold(store::Session& s, const std::string& activity_code, std::optional<int64_t> blocked_prize,
                         int reruns_done);

// The pending grants held by `event_id`, oldest first, at most `limit`, after id `after`.
std::vector<int64_t> held_grants(store::Session& s, int64_t event_id, int64_t after, int64_t limit);

// pending -> cancelled for every grant held by `event_id` (one UPDATE ... WHERE state = 'pending'
// RETURNING id, and one status-log row for each row it moved; a list-issue item waiting on one
// follows it, held -> cancelled). Returns how many grants it moved.
// REQUIRES: called inside a write transaction.
int64_t cancel_held(store::Session& s, int64_t event_id, const std::string& reason, const std::string& actor, Millis now);

// Records r as a grant held by `event_id` (pending, held_by_fuse, taking nothing) with its creation
// log row. Returns its id, or nullopt when a grant with r.biz_id exists already (a twin: the
// caller answers from it). REQUIRES: called inside a write transaction.
std::optional<int64_t> insert_held(store::Session& s, const ClaimRequest& r, int64_t activity_id, int64_t event_id,
                                   const std::string& actor, Millis now);

// A list-issue item waits on its held grant (list_item state `held`, the grant's record code on it)
// and follows it: when the grant is decided, the item moves held -> to (issued, rejected with the
// reason, cancelled) with its own conditional update and status-log row, in the caller's
// transaction, which is the one that moved the grant. Also issued -> failed when a released grant's
// delivery failed (from = issued). Nothing happens for a grant without a list item, or when the
// item is not in state `from`. Returns whether an item moved.
// REQUIRES: called inside the write transaction that moved the grant.
bool follow_held_item(store::Session& s, int64_t grant_id, ListItemState from, ListItemState to,
                      const std::optional<std::string>& reason, const std::string& actor, Millis now);

// Steps 2-8 of the common flow for the held grant `held_id` (record `record_code`) inside tx, adopting
// the pending row (pending -> init) instead of inserting one. Returns the granted grant. Throws
// Rejection (the world changed), HeldGone (already decided). Defined in claim.cpp, next to the flow.
// `moved` (optional) receives the budget ladder step move, for the caller to announce after commit;
// `blocked_prize` (optional), on a held_by_fuse rejection, the prize whose fuse stopped the flow
// (none: the activity's), which need not be a prize the request asked for. `deferred` (optional):
// the hot-row take is recorded there instead of made, as claim_many defers it (engine.hpp), for the
// caller to make at its chunk's end (deferred_takes.hpp); it stays empty when the prize's take
// cannot be deferred. `deliver_now`: a channel in the database delivers inside tx, as a claim's.
GrantView run_held_steps(Engine& e, const ClaimRequest& r, store::Tx& tx, Millis now, int64_t held_id,
                         const std::string& record_code, std::optional<LadderMove>* moved = nullptr,
                         std::optional<int64_t>* blocked_prize = nullptr, std::optional<HotTake>* deferred = nullptr,
                         bool deliver_now = false);

}  // namespace rc::engine
