#pragma once
// Definition versions. Every definition an activity has had is an activity_version row:
//
//   current          the version the activity runs (exactly one; before publishing: the one under review
//                    as the activity's own state says)
//   superseded       an older version: replaced before publishing (activity update), or switched out
//   pending_review -> product_approved -> current      a new version of a running activity (gray, live,
//                    paused), reviewed by two roles as a creation is: approvals are bound to the
//                    version and its SHA-256, the proposer may not approve, the two approvers differ
//                    when review.distinct_approvers is on. The tech approval IS the switch: one
//                    transaction moves N+1 to current, N to superseded and applies N+1 (switch below).
//   pending_review|product_approved -> rejected
// At most one version is in review at a time (a unique index decides between two concurrent
// proposals). Each move is one conditional UPDATE plus one status-log row (entity activity_version).
//
// While N+1 is reviewed, version N keeps running: claims read the activity's version once, in their
// own transaction, and follow only that version's rules (engine/catalog.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/activity/activity.hpp"
#include "core/activity/definition.hpp"
#include "core/store/store.hpp"

namespace rc::activity {

struct VersionRow {
  int64_t id = 0, activity_id = 0, version = 0;
  VersionState state = VersionState::current;
  std::string definition, definition_hash, proposed_by;
  std::optional<std::string> reason, decided_by;
  Millis created_at = 0, updated_at = 0;
  std::optional<Millis> switched_at;
};

bool is_running(ActivityState activity_state);  // gray, live, paused: claims may follow its rules

// The activity's versions, oldest first.
std::vector<VersionRow> versions_of(store::Session& s, int64_t activity_id);
std::optional<VersionRow> find_version(store::Session& s, int64_t activity_id, int64_t version);
// The version in review (pending_review or product_approved), if any.
std::optional<VersionRow> open_version(store::Session& s, int64_t activity_id);

// Records `version` (text, hash) as the activity's current definition: the previous current row
// becomes superseded (with its status-log row). Used by create and by the update of an activity that
// is not yet published. REQUIRES: inside the transaction that stored the definition.
void record_current(store::Session& s, int64_t activity_id, int64_t version, const std::string& text,
                    const std::string& hash, const std::string& who, const std::string& reason, Millis now);

struct ProposeOptions {
  bool publish = false;          // review waived (review.required = false): switch at once
  bool review_required = true;
};

// activity update on a running activity: stores the definition as version N+1 in pending_review while
// N keeps running. The same text as the current version changes nothing. Refused, nothing written:
// Error(data) for a definition a running activity cannot take (another kind, no budget where it has
// one), Error(findings) when another version is in review (approve or reject it first), Error(no_perm)
// for opts.publish while review is required.
CreateResult propose(store::Store& st, const Definition& d, const std::string& text, const ProposeOptions& opts,
                     const Actor& who, Millis now);

// The review of the version in review of running activity `a`, inside the approve/reject
// transaction (lifecycle.cpp calls these for an activity that is gray, live or paused). Approve
// follows create's rules (above); the tech approval switches. An illegal move changes nothing and
// says so (changed = false).
TransitionResult approve_version(store::Tx& tx, const ActivityRow& a, Role role,
                                 const std::optional<std::string>& comment, const ReviewPolicy& pol, const Actor& who,
                                 Millis now);
TransitionResult reject_version(store::Tx& tx, const ActivityRow& a, Role role, const std::string& reason,
                                const Actor& who, Millis now);

// PostgreSQL: the arguments of the activity's claim lock (an advisory lock) for the activity code
// given as the SQL expression code_sql. A claim holds it shared (engine/activity_gate.cpp), a switch
// exclusively.
std::string claim_lock_args(const std::string& code_sql);

// The switch from the running version to `v` (version_switch.cpp), in tx: on PostgreSQL it first
// takes the activity's claim lock exclusively (engine/activity_gate.hpp), so no claim is between its
// read of the version and its commit; then one conditional UPDATE of the activity's version
// (WHERE version = N: a concurrent switch makes it throw store::Retryable), and the definition's
// rules: header, limits, items and prizes by code (a prize keeps its id, stock and buckets; a new
// prize gets its stock; a prize the version lacks is retired: never drawn again, its stock stays
// accounted), a budget where there was none, listed users added, fuse rules by name (a rule the
// version lacks is disabled). Returns what it did, for people. Error(data) when the version's
// budget is below what is already consumed.
std::vector<std::string> switch_to(store::Tx& tx, const ActivityRow& a, const VersionRow& v, const Definition& d,
                                   const std::string& who, Millis now);

}  // namespace rc::activity
