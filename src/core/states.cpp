#include "core/states.hpp"

#include "base/error.hpp"

namespace rc {

const NameTable<ActivityState>& names(ActivityState) {
  using S = ActivityState;
  static const NameTable<S> t{"activity state",
                              {{S::pending_review, "pending_review"},
                               {S::product_approved, "product_approved"},
                               {S::approved, "approved"},
                               {S::rejected, "rejected"},
                               {S::gray, "gray"},
                               {S::live, "live"},
                               {S::paused, "paused"},
                               {S::ended, "ended"},
                               {S::offline, "offline"}}};
  return t;
}

const NameTable<VersionState>& names(VersionState) {
  using S = VersionState;
  static const NameTable<S> t{"definition version state",
                              {{S::current, "current"},
                               {S::superseded, "superseded"},
                               {S::pending_review, "pending_review"},
                               {S::product_approved, "product_approved"},
                               {S::rejected, "rejected"}}};
  return t;
}

const NameTable<GrantState>& names(GrantState) {
  using S = GrantState;
  static const NameTable<S> t{"grant state",
                              {{S::init, "init"},
                               {S::pending, "pending"},
                               {S::issuing, "issuing"},
                               {S::success, "success"},
                               {S::failed, "failed"},
                               {S::delayed_resend, "delayed_resend"},
                               {S::awaiting_external, "awaiting_external"},
                               {S::invalid, "invalid"},
                               {S::expired, "expired"},
                               {S::reversed, "reversed"},
                               {S::cancelled, "cancelled"}}};
  return t;
}

const NameTable<QualificationStatus>& names(QualificationStatus) {
  using S = QualificationStatus;
  static const NameTable<S> t{"qualification status",
                              {{S::unused, "unused"}, {S::used, "used"}, {S::revoked, "revoked"}, {S::expired, "expired"}}};
  return t;
}

const NameTable<BillState>& names(BillState) {
  using S = BillState;
  static const NameTable<S> t{"delivery bill state",
                              {{S::sending, "sending"},
                               {S::success, "success"},
                               {S::failed, "failed"},
                               {S::awaiting_external, "awaiting_external"},
                               {S::retryable, "retryable"},
                               {S::unknown, "unknown"},
                               {S::abandoned, "abandoned"}}};
  return t;
}

const NameTable<ResendState>& names(ResendState) {
  using S = ResendState;
  static const NameTable<S> t{"resend bill state", {{S::pending, "pending"}, {S::manual, "manual"}, {S::done, "done"}}};
  return t;
}

const NameTable<ListBatchState>& names(ListBatchState) {
  using S = ListBatchState;
  static const NameTable<S> t{"list batch state",
                              {{S::planned, "planned"},
                               {S::approved, "approved"},
                               {S::running, "running"},
                               {S::done, "done"},
                               {S::cancelled, "cancelled"}}};
  return t;
}

const NameTable<ListItemState>& names(ListItemState) {
  using S = ListItemState;
  static const NameTable<S> t{"list item state",
                              {{S::pending, "pending"},
                               {S::held, "held"},
                               {S::issued, "issued"},
                               {S::rejected, "rejected"},
                               {S::failed, "failed"},
                               {S::cancelled, "cancelled"}}};
  return t;
}

const NameTable<ChangeRequestState>& names(ChangeRequestState) {
  using S = ChangeRequestState;
  static const NameTable<S> t{"change request state",
                              {{S::proposed, "proposed"}, {S::applied, "applied"}, {S::rejected, "rejected"}}};
  return t;
}

const NameTable<FuseEventState>& names(FuseEventState) {
  using S = FuseEventState;
  static const NameTable<S> t{"fuse event state", {{S::tripped, "tripped"}, {S::released, "released"}}};
  return t;
}

const NameTable<AlertState>& names(AlertState) {
  using S = AlertState;
  static const NameTable<S> t{
      "alert state", {{S::pending, "pending"}, {S::sent, "sent"}, {S::skipped, "skipped"}, {S::failed, "failed"}}};
  return t;
}

const NameTable<ImportRunState>& names(ImportRunState) {
  using S = ImportRunState;
  static const NameTable<S> t{"import run state", {{S::running, "running"}, {S::done, "done"}}};
  return t;
}

const NameTable<OutboxState>& names(OutboxState) {
  using S = OutboxState;
  static const NameTable<S> t{"outbox state", {{S::pending, "pending"}, {S::done, "done"}, {S::failed, "failed"}}};
  return t;
}

const NameTable<activity::Kind>& names(activity::Kind) {
  using K = activity::Kind;
  static const NameTable<K> t{"activity kind", {{K::direct, "direct"}, {K::lottery, "lottery"}, {K::redpack, "redpack"}}};
  return t;
}

void throw_unknown_name(const char* what, std::string_view s) {
  const size_t kShown = 64;  // a huge value is named by its start
  std::string shown(s.substr(0, kShown));
  if (s.size() > kShown) shown += "...";
  throw Error(Errc::internal, std::string("the database holds an unknown ") + what + " '" + shown +
                                  "' (written by another rewardctl version, or by hand?)");
}

}  // namespace rc
