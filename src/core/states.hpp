#pragma once
// The states of everything that has a state machine (docs/design.md §3), and the activity kind, as
// enums with one name table each. The names are what the database stores, what the status log
// records and what `-o json` and the tables show: a state is turned into text, and text into a
// state, only through these tables. SQL text may still spell a state inside a query (an index
// predicate, a WHERE on a constant); everything the code compares or binds goes through here.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rc {

// activity.state (core/activity/lifecycle.cpp). There is no draft: an activity is created in
// pending_review.
enum class ActivityState { pending_review, product_approved, approved, rejected, gray, live, paused, ended, offline };
// activity_version.state (core/activity/versions.cpp).
enum class VersionState { current, superseded, pending_review, product_approved, rejected };
// grants.state (core/engine/).
enum class GrantState {
  init,
  pending,
  issuing,
  success,
  failed,
  delayed_resend,
  awaiting_external,
  invalid,
  expired,
  reversed,
  cancelled,
};
// qualification.status (core/engine/qualification.cpp, jobs/import/revoke.cpp, jobs/expire/expire.cpp).
enum class QualificationStatus { unused, used, revoked, expired };
// delivery_bill.state (core/engine/bill.cpp): a record of attempts, not logged. abandoned: `resend
// abandon` gave the grant up (jobs/resend/resend.cpp).
enum class BillState { sending, success, failed, awaiting_external, retryable, unknown, abandoned };
// resend_bill.state (core/engine/resend.cpp, jobs/resend/resend.cpp).
enum class ResendState { pending, manual, done };
// list_batch.state and list_item.state (jobs/list_issue*.cpp).
enum class ListBatchState { planned, approved, running, done, cancelled };
enum class ListItemState { pending, held, issued, rejected, failed, cancelled };
// change_request.state (core/activity/live.cpp).
enum class ChangeRequestState { proposed, applied, rejected };
// fuse_event.state (jobs/fuse*.cpp).
enum class FuseEventState { tripped, released };
// alert_outbox.state (core/alert_outbox.cpp).
enum class AlertState { pending, sent, skipped, failed };
// import_run.state (jobs/import/import_qualifications.cpp).
enum class ImportRunState { running, done };
// outbox.state (core/engine/deliver*.cpp, completion.cpp): the hand-over to an external system, not logged.
enum class OutboxState { pending, done, failed };

namespace activity {
// activity.kind.
enum class Kind { direct, lottery, redpack };
}  // namespace activity

// The one name table of an enum: every value exactly once, in declaration order (so that a value's
// name is entries[value]; tests/unit/test_states.cpp checks it), and `what` names the table in
// messages ("grant state").
template <class E>
struct NameTable {
  const char* what;
  std::vector<std::pair<E, const char*>> entries;
  auto begin() const { return entries.begin(); }
  auto end() const { return entries.end(); }
};

const NameTable<ActivityState>& names(ActivityState);
const NameTable<VersionState>& names(VersionState);
const NameTable<GrantState>& names(GrantState);
const NameTable<QualificationStatus>& names(QualificationStatus);
const NameTable<BillState>& names(BillState);
const NameTable<ResendState>& names(ResendState);
const NameTable<ListBatchState>& names(ListBatchState);
const NameTable<ListItemState>& names(ListItemState);
const NameTable<ChangeRequestState>& names(ChangeRequestState);
const NameTable<FuseEventState>& names(FuseEventState);
const NameTable<AlertState>& names(AlertState);
const NameTable<ImportRunState>& names(ImportRunState);
const NameTable<OutboxState>& names(OutboxState);
const NameTable<activity::Kind>& names(activity::Kind);

// The stored name of a value.
template <class E>
const char* name(E v) {
  return names(E{}).entries[static_cast<size_t>(v)].second;
}

// Every name of the table, in order (a CLI option's allowed values, an error's list).
template <class E>
std::vector<std::string> all_names() {
  std::vector<std::string> out;
  for (auto& [e, n] : names(E{})) out.emplace_back(n);
  return out;
}

// The value of a name; nullopt for a name that is not in the table (input to validate).
template <class E>
std::optional<E> parse_state(std::string_view s) {
  for (auto& [e, n] : names(E{}))
    if (s == n) return e;
  return std::nullopt;
}

// Throws Error(internal) "the database holds an unknown <what> '<s>'".
[[noreturn]] void throw_unknown_name(const char* what, std::string_view s);

// The value read from a database row. A name that is not in the table means the database holds
// something this binary does not know (written by hand, or by another version): Error(internal).
template <class E>
E state_from_db(std::string_view s) {
  if (auto e = parse_state<E>(s)) return *e;
  throw_unknown_name(names(E{}).what, s);
}

// nlohmann::json writes a typed state as its name (found by ADL; without it, json would silently
// write the enum's number).
#define RC_STATE_TO_JSON(E) \
  template <class Json>     \
  void to_json(Json& j, const E& v) { j = name(v); }
RC_STATE_TO_JSON(ActivityState)
RC_STATE_TO_JSON(VersionState)
RC_STATE_TO_JSON(GrantState)
RC_STATE_TO_JSON(QualificationStatus)
RC_STATE_TO_JSON(BillState)
RC_STATE_TO_JSON(ResendState)
RC_STATE_TO_JSON(ListBatchState)
RC_STATE_TO_JSON(ListItemState)
RC_STATE_TO_JSON(ChangeRequestState)
RC_STATE_TO_JSON(FuseEventState)
RC_STATE_TO_JSON(AlertState)
RC_STATE_TO_JSON(ImportRunState)
RC_STATE_TO_JSON(OutboxState)
#undef RC_STATE_TO_JSON
namespace activity {
template <class Json>
void to_json(Json& j, const Kind& v) { j = name(v); }
}  // namespace activity

// The table and the status-log entity of each logged state machine (audit.hpp's typed transition,
// log_created and log_moved).
template <class E>
struct StateMachine;
template <>
struct StateMachine<ActivityState> {
  static constexpr const char* table = "activity";
  static constexpr const char* entity = "activity";
};
template <>
struct StateMachine<VersionState> {
  static constexpr const char* table = "activity_version";
  static constexpr const char* entity = "activity_version";
};
template <>
struct StateMachine<GrantState> {
  static constexpr const char* table = "grants";
  static constexpr const char* entity = "grant";
};
template <>
struct StateMachine<QualificationStatus> {
  static constexpr const char* table = "qualification";
  static constexpr const char* entity = "qualification";
};
template <>
struct StateMachine<ResendState> {
  static constexpr const char* table = "resend_bill";
  static constexpr const char* entity = "resend_bill";
};
template <>
struct StateMachine<ListBatchState> {
  static constexpr const char* table = "list_batch";
  static constexpr const char* entity = "list_batch";
};
template <>
struct StateMachine<ListItemState> {
  static constexpr const char* table = "list_item";
  static constexpr const char* entity = "list_item";
};
template <>
struct StateMachine<ChangeRequestState> {
  static constexpr const char* table = "change_request";
  static constexpr const char* entity = "change_request";
};
template <>
struct StateMachine<FuseEventState> {
  static constexpr const char* table = "fuse_event";
  static constexpr const char* entity = "fuse_event";
};
template <>
struct StateMachine<AlertState> {
  static constexpr const char* table = "alert_outbox";
  static constexpr const char* entity = "alert";
};
template <>
struct StateMachine<ImportRunState> {
  static constexpr const char* table = "import_run";
  static constexpr const char* entity = "import_run";
};

}  // namespace rc
