// The read side: show, list, history.
#include <algorithm>

#include "core/activity/activity.hpp"
#include "core/activity/read.hpp"
#include "core/activity/versions.hpp"

namespace rc::activity {

ActivitySummary show(store::Store& st, const std::string& code) {
  ActivitySummary out;
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    out = ActivitySummary{};
    out.activity = get(tx, code);
    const int64_t id = out.activity.id;
    auto b = tx.query("SELECT authorised_cents, consumed_cents, warn_ppm, degrade_ppm, stop_ppm, ladder_step FROM budget "
                      "WHERE activity_id = $1",
                      {id});
    if (!b.empty())
      out.budget = BudgetSummary{b[0].i64(0),     b[0].i64(1),     b[0].opt_i64(2),
                                 b[0].opt_i64(3), b[0].opt_i64(4), b[0].str_or(5, "normal")};
    auto p = tx.query(
        "SELECT p.code, i.code, i.kind, p.amount, p.amount_max, p.stock_total, "
        "(SELECT COALESCE(SUM(s.remain), 0) FROM stock s WHERE s.prize_id = p.id), p.buckets, p.weight, "
        "p.consolation, p.blocked, i.channel, p.retired, p.high_value FROM prize p JOIN item i ON i.id = p.item_id "
        "WHERE p.activity_id = $1 ORDER BY p.id",
        {id});
    for (auto& r : p.rows) {
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
      out.prizes.push_back(std::move(x));
    }
    auto rv = tx.query(
        "SELECT role, decision, operator, definition_hash, voided, comment, created_at, version FROM activity_review "
        "WHERE activity_id = $1 ORDER BY id",
        {id});
    for (auto& r : rv.rows)
      out.reviews.push_back({r.str(0), r.str(1), r.str(2), r.str(3), r.i64(4) != 0, r.opt_str(5), r.i64(6), r.opt_i64(7)});
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
  for (auto& row : r.rows)
    out.push_back({row.str(0), row.str(1), row.str(2), row.str(3), row.str(4), row.i64(5), row.i64(6), row.i64(7)});
  return out;
}

std::vector<HistoryEvent> history(store::Store& st, const std::string& code) {
  std::vector<HistoryEvent> out;
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    out.clear();
    auto a = get(tx, code);
    struct Ev {
      int order;
      int64_t id;
      HistoryEvent e;
    };
    std::vector<Ev> evs;
    auto s = tx.query(
        "SELECT id, from_state, to_state, actor, reason, created_at FROM status_log WHERE entity = 'activity' "
        "AND entity_id = $1 ORDER BY id",
        {a.id});
    for (auto& r : s.rows) {
      HistoryEvent e;
      e.at = r.i64(5);
      e.from_status_log = true;
      e.actor = r.str(3);
      e.from = r.opt_str(1);
      e.to = r.str(2);
      e.what = e.from.value_or("(new)") + " -> " + e.to;
      e.detail = r.str_or(4, "");
      evs.push_back({0, r.i64(0), std::move(e)});
    }
    auto au = tx.query(
        "SELECT id, operator, action, detail, created_at FROM audit WHERE entity = 'activity' AND entity_key = $1 "
        "ORDER BY id",
        {code});
    for (auto& r : au.rows) {
      HistoryEvent e;
      e.at = r.i64(4);
      e.actor = r.str(1);
      e.what = r.str(2);
      e.detail = r.str_or(3, "");
      evs.push_back({1, r.i64(0), std::move(e)});
    }
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
    auto rv = tx.query("SELECT role, operator, version, definition_hash FROM activity_review WHERE activity_id = $1 "
                       "AND decision = 'approve' AND voided = 0 ORDER BY id",
                       {a.id});
    for (auto& v : versions_of(tx, a.id)) {
      VersionEntry e{v.version, name(v.state), v.definition_hash, v.proposed_by, {}, {}, v.decided_by, v.reason,
                     v.created_at, v.switched_at};
      for (auto& r : rv.rows) {
        const bool mine = r.is_null(2) ? r.str(3) == v.definition_hash : r.i64(2) == v.version;
        if (mine) (r.str(0) == "product" ? e.product_by : e.tech_by) = r.str(1);
      }
      out.push_back(std::move(e));
    }
  });
  return out;
}

}  // namespace rc::activity
