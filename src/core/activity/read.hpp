#pragma once
// The read side of activities: show, list, history. Returns rows as structs; the CLI decides how
// they look (table or JSON).
#include <optional>
#include <string>
#include <vector>

#include "core/activity/activity.hpp"
#include "core/store/store.hpp"

namespace rc::activity {

struct PrizeSummary {
  std::string prize, item, item_kind, channel;
  int64_t amount = 0;
  std::optional<int64_t> amount_max;  // a red packet's range is amount..amount_max
  int64_t stock = 0, stock_left = 0, buckets = 1, weight = 0;
  bool consolation = false, blocked = false;
  bool retired = false;  // the current version no longer has it: never drawn, its stock still accounted
  bool high_value = false;  // switched off from the budget ladder's degrade step on
};

struct ReviewEntry {
  std::string role, decision, operator_name, definition_hash;
  bool voided = false;
  std::optional<std::string> comment;
  Millis at = 0;
  std::optional<int64_t> version;  // the definition version decided on (none: before schema v6)
};

struct BudgetSummary {
  int64_t authorised_cents = 0, consumed_cents = 0;
  // the budget ladder: ratios in millionths (empty: step not configured) and the step last logged
  std::optional<int64_t> warn_ppm, degrade_ppm, stop_ppm;
  std::string ladder_step = "normal";
};

struct ActivitySummary {
  ActivityRow activity;
  std::optional<BudgetSummary> budget;  // none when the activity has no budget
  std::vector<PrizeSummary> prizes;
  std::vector<ReviewEntry> reviews;     // oldest first
  int64_t grants = 0;                   // not reversed
  int64_t granted_cost_cents = 0;
};

// Summary, state, window, stock left per prize, budget used, review decisions, in one consistent
// read. Throws Error(data) when there is no such activity.
ActivitySummary show(store::Store& st, const std::string& code);

struct ActivityListRow {
  std::string code, name;
  Kind kind = Kind::direct;
  ActivityState state = ActivityState::pending_review;
  std::string timezone;
  Millis start_at = 0, end_at = 0;
  int64_t version = 1;
};
// Every activity (or those in `state`), oldest first.
std::vector<ActivityListRow> list(store::Store& st, const std::optional<std::string>& state);

struct HistoryEvent {
  Millis at = 0;
  bool from_status_log = false;       // else from the audit trail
  std::string actor, what;
  std::optional<std::string> from;    // status log: the state before (none for a creation)
  std::string to;                     // status log: the state after
  std::string detail;                 // reason, or the audit detail
};
// Status log and audit rows of the activity, oldest first (a status change before the audit row of
// the same instant). Throws Error(data) when there is no such activity.
std::vector<HistoryEvent> history(store::Store& st, const std::string& code);

struct VersionEntry {
  int64_t version = 0;
  VersionState state = VersionState::current;
  std::string definition_hash, proposed_by;
  std::optional<std::string> product_by, tech_by;  // the approvals this version holds
  std::optional<std::string> decided_by, reason;   // who rejected it and why; or who switched to it
  Millis created_at = 0;
  std::optional<Millis> switched_at;               // when it became current
};
// The activity's definition versions (versions.hpp), oldest first, with who proposed and approved
// each. Throws Error(not_found) when there is no such activity.
std::vector<VersionEntry> version_history(store::Store& st, const std::string& code);

}  // namespace rc::activity
