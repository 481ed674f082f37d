#pragma once
// Activities in the database: create/update from a reviewed definition, the two-role review, the
// publish/pause/resume/offline state machine, and the read side (show, list, history).
//
// Activity states (DESIGN §3):
//   pending_review -> product_approved -> approved -> gray -> live      (approve, approve, publish)
//   approved -> live (publish --full), gray|live <-> paused, gray|live|paused -> ended (expire job)
//   any non-final -> offline (operator), pending_review|product_approved -> rejected
// Every transition is one conditional UPDATE plus one status-log row in the same transaction.
#include <optional>
#include <string>
#include <vector>

#include "core/activity/definition.hpp"
#include "core/store/store.hpp"

namespace rc::activity {

struct ActivityRow {
  int64_t id = 0;
  std::string code, name, timezone, definition_hash, created_by, definition;
  Kind kind = Kind::direct;
  ActivityState state = ActivityState::pending_review;
  int64_t version = 1;
  Millis start_at = 0, end_at = 0, created_at = 0, updated_at = 0;
  bool whitelist_required = false;
  std::optional<int64_t> user_limit;
  std::optional<std::string> user_limit_period;
};

std::optional<ActivityRow> find(store::Session& s, const std::string& code);
// Throws Error(not_found) "no activity CODE" when missing.
ActivityRow get(store::Session& s, const std::string& code);

// The activity's id, read on its own (autocommit, retried like Store::query). Throws Error(not_found)
// "no activity 'CODE' (see rewardctl activity list)" when missing.
int64_t id_of(store::Store& st, const std::string& code);

bool is_final(ActivityState state);  // ended, offline, rejected

struct Actor {
  std::string name;             // the operator
  bool dry_run = false;
};

struct CreateOptions {
  bool publish = false;          // review waived (review.required = false): straight to live
  bool review_required = true;
};

struct CreateResult {
  int64_t id = 0;
  std::string code, state, hash;
  int64_t version = 0;           // the definition version stored (0: nothing stored)
  std::string version_state;     // its state (versions.hpp): current, pending_review, ...
  bool dry_run = false;
  std::vector<std::string> log;  // what was (or would be) done, for people
};

// Stores a definition that passed lint. An existing code is refused with Error(data).
// With opts.publish (allowed only when review is not required) the activity goes live at once and
// the audit says the review was waived; otherwise Error(no_perm).
CreateResult create(store::Store& st, const Definition& d, const std::string& text, const CreateOptions& opts,
                    const Actor& who, Millis now);

// Stores a new version of an activity that is not yet live (pending_review, product_approved,
// approved, rejected): replaces prizes, stock and budget, voids the approvals given to the old hash
// and returns the activity to pending_review. An unchanged definition changes nothing. For a running
// activity (gray, live, paused) it proposes version N+1 for review instead (versions.hpp: propose,
// with opts.publish and opts.review_required).
CreateResult update(store::Store& st, const Definition& d, const std::string& text, const Actor& who, Millis now,
                    const CreateOptions& opts = {});

struct ApplyResult {
  std::string action;         // created, unchanged or updated
  std::string previous_hash;  // the stored definition's hash ("" when it was created)
  CreateResult result;
};

// Idempotent seeding (activity apply): creates the activity when its code is absent (with opts, as
// create), does nothing when the stored definition has the same SHA-256, updates one that is not yet
// published (as update), and refuses with Error(data), naming both hashes, a different definition
// for one that has been published (gray, live, paused, ended, offline). A concurrent apply of the
// same file is answered "unchanged", not an error.
ApplyResult apply(store::Store& st, const Definition& d, const std::string& text, const CreateOptions& opts,
                  const Actor& who, Millis now);

struct TransitionResult {
  bool changed = false;
  bool dry_run = false;
  std::string code, from, to;
  std::string message;  // for people: what happened, or why nothing did (naming the current state)
  std::optional<int64_t> version;  // a version's review (versions.hpp): from/to are that version's states
};

enum class Role { product, tech };
const char* role_name(Role r);

struct ReviewPolicy {
  bool distinct_approvers = true;
};

// Approve as a role. The creator may not approve, and with the policy on the two approvers must
// differ (Error(no_perm) naming the rule). Product approves first, then tech. An approval records
// operator, role, time and the definition hash it approved.
TransitionResult approve(store::Store& st, const std::string& code, Role role, const std::optional<std::string>& comment,
                         const ReviewPolicy& pol, const Actor& who, Millis now);
TransitionResult reject(store::Store& st, const std::string& code, Role role, const std::string& reason,
                        const Actor& who, Millis now);

enum class Op { publish_gray, publish_full, pause, resume, offline };
const char* op_name(Op op);
// publish --gray/--full, pause, resume, offline. An illegal transition, including one to the state
// the activity is already in, changes nothing and says so (changed = false).
TransitionResult control(store::Store& st, const std::string& code, Op op, const std::optional<std::string>& reason,
                         const Actor& who, Millis now);

}  // namespace rc::activity
