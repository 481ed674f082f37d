#pragma once
// Live changes to an activity that keeps running: its blacklist and gray list, its stock, its budget.
//
// Lists change at once, in any state, and take effect on the next claim in every process: the claim
// reads them in its own transaction (engine/activity_gate), nothing caches them.
//
// Stock and budget are money. Every change is a change_request row, so `activity change list` is the
// one record of what changed, who asked, who approved and why:
//   applied at once:     a change that does not raise what can be spent (stock removed, a budget set
//                        no higher), or any change when review.required is off;
//   proposed -> applied: a change that raises what can be spent (a budget raise, a budget set higher,
//                        stock added to a cash prize or one that costs money) when review.required is
//                        on; another operator approves it (`activity change approve ID`), and only
//                        then it applies, in the approving transaction;
//   proposed -> rejected by an operator (`activity change reject ID --reason R`).
// Each state change is one conditional UPDATE plus one status-log row (entity change_request); each
// operator action one audit row. Limits are checked when the change applies, not when it is
// proposed: stock is never removed below what is left, a budget never set below what is consumed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/activity/activity.hpp"
#include "core/clock.hpp"
#include "core/budget_ladder.hpp"
#include "core/states.hpp"
#include "core/store/store.hpp"

namespace rc::activity::live {

enum class UserList { black, gray };
const char* user_list_name(UserList l);

struct ListChange {
  std::string code, list, op;  // op: add | remove
  int64_t requested = 0;       // distinct users asked for
  int64_t changed = 0;         // users added (not already listed) or removed (listed)
  bool dry_run = false;
};

// Adds users to, or removes them from, the activity's blacklist or gray list, in one transaction with
// one audit row. REQUIRES: users are valid identifiers (the caller checks them). Error(data) for an
// unknown activity.
ListChange change_user_list(store::Store& st, const std::string& code, UserList list, bool add,
                            const std::vector<std::string>& users, const Actor& who, Millis now);

enum class ChangeKind { stock_add, stock_remove, budget_raise, budget_set };
const char* change_kind_name(ChangeKind k);

struct ChangeSpec {
  ChangeKind kind = ChangeKind::stock_add;
  std::string code;
  std::string prize;      // stock changes only
  int64_t amount = 0;     // units of stock, or cents; > 0 (budget_set: >= 0)
  std::string reason;     // required
};

struct Change {
  int64_t id = 0;  // the change request (0 under dry run when it would be new)
  std::string code, kind, prize, reason, requested_by;
  ChangeRequestState state = ChangeRequestState::proposed;
  std::optional<std::string> decided_by, decision_reason;
  int64_t amount = 0;
  std::optional<int64_t> before, after;  // stock total of the prize, or authorised budget, when applied
  Millis created_at = 0;
  std::optional<Millis> decided_at;
  bool dry_run = false;
  std::string message;  // for people
  // A budget change that moved the budget ladder's step (back under a threshold, or over one when set
  // lower): moved and logged in the same transaction, the log line written after the commit.
  std::optional<LadderMove> ladder;
};

// Whether this change raises what the activity can spend (and so needs a second operator when
// review is required).
bool raises_spend(store::Session& s, const ChangeSpec& c, int64_t activity_id);

// Records the change and applies it at once, or stores it proposed (see above). Error(data) when the
// activity is not gray, live or paused, the prize is unknown, a limit would be broken, or the
// activity has no budget; Error(usage) for a non-positive amount or an empty reason.
Change request(store::Store& st, const ChangeSpec& c, bool review_required, const Actor& who, Millis now);
// proposed -> applied by another operator than the one who proposed it (Error(no_perm) otherwise).
// Error(findings) for a change no longer proposed (an illegal transition); Error(data) for an unknown
// id or a limit the change would now break (then it stays proposed). Concurrent changes and approvals
// of one prize or budget apply one after the other (the rows are locked), never from one start value.
Change approve(store::Store& st, int64_t id, const Actor& who, Millis now);
// proposed -> rejected, with the reason.
Change reject(store::Store& st, int64_t id, const std::string& reason, const Actor& who, Millis now);
// Newest first; of one activity and/or one state when given. Error(data) for an unknown activity.
std::vector<Change> list(store::Store& st, const std::optional<std::string>& code,
                         const std::optional<std::string>& state);

}  // namespace rc::activity::live
