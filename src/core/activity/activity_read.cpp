// The read side: show, list, history.
#include <algorithm>

#include "core/activity/activity.hpp"
#include "core/activity/read.hpp"
#include "core/activity/versions.hpp"

namespace rc::activity {
namespace {

// Each query below has one function that knows its columns, next to it.

const char* kBudgetSelect =
    "SELECT authorised_cents, consumed_cents, warn_ppm, degrade_ppm, stop_ppm, ladder_step FROM budget "
    "WHERE activity_id = $1";
BudgetSummary to_budget(const store::Row& r) {
  return {r.i64(0), r.i64(1), r.opt_i64(2), r.opt_i64(3), r.opt_i64(4), r.str_or(5, "normal")};
}

const char* kPrizeSelect =
    "SELECT p.code, i.code, i.kind, p.amount, p.amount_max, p.stock_total, "
    "(SELECT COALESCE(SUM(s.remain), 0) FROM stock s WHERE s.prize_id = p.id), p.buckets, p.weight, "
    "p.consolation, p.blocked, i.channel, p.retired, p.high_value FROM prize p JOIN item i ON i.id = p.item_id "
    "WHERE p.activity_id = $1 ORDER BY p.id";
PrizeSummary to_prize(const store::Row& r) {
  PrizeSummary x;
  x.prize = r.str(0);
  x.item = r.str(1);
  x.item_kind = r.str(2);
  x.amount = r.i64(3);
  x.amount_max = r.opt_i64(4);
  x.stock = r.i64(5);
  x.stock_left = r.i64(6);
  x.buckets = r.i64(7);
  x.weight = r.i64(8);
  x.consolation = r.i64(9) != 0;
  x.blocked = r.i64(10) != 0;
  x.channel = r.str(11);
  x.retired = r.i64(12) != 0;
  x.high_value = r.i64(13) != 0;
  return x;
}

const char* kReviewSelect =
    "SELECT role, decision, operator, definition_hash, voided, comment, created_at, version FROM activity_review "
    "WHERE activity_id = $1 ORDER BY id";
ReviewEntry to_review(const store::Row& r) {
  return {r.str(0), r.str(1), r.str(2), r.str(3), r.i64(4) != 0, r.opt_str(5), r.i64(6), r.opt_i64(7)};
}

ActivityListRow to_list_row(const store::Row& r) {
  return {r.str(0),
          r.str(1),
          state_from_db<Kind>(r.str(2)),
          state_from_db<ActivityState>(r.str(3)),
          r.str(4),
          r.i64(5),
          r.i64(6),
          r.i64(7)};
}

// A history event and where it sorts among those of the same instant.
struct Ev {
  int order;   // 0: status log, 1: audit
  int64_t id;  // the row's id in its table
  HistoryEvent e;
};

const char* kStatusLogSelect =
    "SELECT id, from_state, to_state, actor, reason, created_at FROM status_log WHERE entity = 'activity' "
    "AND entity_id = $1 ORDER BY id";
Ev to_status_event(const store::Row& r) {
  HistoryEvent e;
  e.at = r.i64(5);
  e.from_status_log = true;
  e.actor = r.str(3);
  e.from = r.opt_str(1);
  e.to = r.str(2);
  e.what = e.from.value_or("(new)") + " -> " + e.to;
  e.detail = r.str_or(4, "");
  return {0, r.i64(0), std::move(e)};
}

const char* kAuditSelect =
    "SELECT id, operator, action, detail, created_at FROM audit WHERE entity = 'activity' AND entity_key = $1 "
    "ORDER BY id";
Ev to_audit_event(const store::Row& r) {
  HistoryEvent e;
  e.at = r.i64(4);
  e.actor = r.str(1);
  e.what = r.str(2);
  e.detail = r.str_or(3, "");
  return {1, r.i64(0), std::move(e)};
}

// A current approval; approvals made before schema v6 name no version, only the hash they approved.
struct ApprovalRow {
  std::string role, operator_name, definition_hash;
  std::optional<int64_t> version;
  // whether it approves version v: by its version, or (before v6) by its hash
  bool approves(const VersionRow& v) const { return version ? *version == v.version : definition_hash == v.definition_hash; }
};
const char* kApprovalSelect =
    "SELECT role, operator, version, definition_hash FROM activity_review WHERE activity_id = $1 "
    "AND decision = 'approve' AND voided = 0 ORDER BY id";
ApprovalRow to_approval(const store::Row& r) { return {r.str(0), r.str(1), r.str(3), r.opt_i64(2)}; }

}  // namespace

ActivitySummary show(store::Store& st, const std::string& code) {
  ActivitySummary out;
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    out = ActivitySummary{};
    out.activity = get(tx, code);
    const int64_t id = out.activity.id;
    auto b = tx.query(kBudgetSelect, {id});
    if (!b.empty()) out.budget = to_budget(b[0]);
    for (auto& r : tx.query(kPrizeSelect, {id}).rows) out.prizes.push_back(to_prize(r));
    for (auto& r : tx.query(kReviewSelect, {id}).rows) out.reviews.push_back(to_review(r));
    auto g = tx.query("SELECT count(*), COALESCE(SUM(cost_cents), 0) FROM grants WHERE activity_id = $1 AND state <> 'reversed'",
                      {id});
    out.grants = g[0].i64(0);
    out.granted_cost_cents = g[0].i64(1);
  });
  return out;
}

std::vector<ActivityListRow> list(store::Store& st, const std::optional<std::string>& state) {
  std::vector<ActivityListRow> out;
  std::string sql =
      "SELECT code, name, kind, state, timezone, start_at, end_at, version FROM activity" +
      std::string(state ? " WHERE state = $1" : "") + " ORDER BY id";
  store::Params p;
  if (state) p.push_back(*state);
  auto r = st.query(sql, p);
  for (auto& row : r.rows) out.push_back(to_list_row(row));
  return out;
}

std::vector<HistoryEvent> history(store::Store& st, const std::string& code) {
  std::vector<HistoryEvent> out;
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    out.clear();
    auto a = get(tx, code);
    std::vector<Ev> evs;
    for (auto& r : tx.query(kStatusLogSelect, {a.id}).rows) evs.push_back(to_status_event(r));
    for (auto& r : tx.query(kAuditSelect, {code}).rows) evs.push_back(to_audit_event(r));
    std::stable_sort(evs.begin(), evs.end(), [](const Ev& x, const Ev& y) {
      if (x.e.at != y.e.at) return x.e.at < y.e.at;
      if (x.order != y.order) return x.order < y.order;
      return x.id < y.id;
    });
    for (auto& e : evs) out.push_back(std::move(e.e));
  });
  return out;
}

std::vector<VersionEntry> version_history(store::Store& st, const std::string& code) {
  std::vector<VersionEntry> out;
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    out.clear();
    auto a = get(tx, code);
    // approvals made before schema v6 name no version: they belong to the version with their hash
    std::vector<ApprovalRow> approvals;
    for (auto& r : tx.query(kApprovalSelect, {a.id}).rows) approvals.push_back(to_approval(r));
    for (auto& v : versions_of(tx, a.id)) {
      VersionEntry e{v.version, v.state, v.definition_hash, v.proposed_by, {}, {}, v.decided_by, v.reason,
                     v.created_at, v.switched_at};
      for (auto& ap : approvals)
        if (ap.approves(v)) (ap.role == "product" ? e.product_by : e.tech_by) = ap.operator_name;
      out.push_back(std::move(e));
    }
  });
  return out;
}

}  // namespace rc::activity
