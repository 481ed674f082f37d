// The read side: show, list, history. Returns JSON values that the CLI prints as tables or lines.
#include <nlohmann/json.hpp>

#include "core/activity/activity.hpp"
#include "core/activity/read.hpp"

namespace rc::activity {

using nlohmann::json;

json show(store::Store& st, const std::string& code) {
  json out;
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    auto a = get(tx, code);
    out = {{"code", a.code},
           {"name", a.name},
           {"kind", a.kind},
           {"state", a.state},
           {"version", a.version},
           {"definition_hash", a.definition_hash},
           {"timezone", a.timezone},
           {"start", format_in_zone(a.start_at, a.timezone)},
           {"end", format_in_zone(a.end_at, a.timezone)},
           {"start_utc", format_utc(a.start_at)},
           {"end_utc", format_utc(a.end_at)},
           {"whitelist_required", a.whitelist_required},
           {"user_limit", a.user_limit ? json(std::to_string(*a.user_limit) + "/" + a.user_limit_period.value_or(""))
                                       : json(nullptr)},
           {"created_by", a.created_by},
           {"created_at", format_utc(a.created_at)}};
    auto b = tx.query("SELECT authorised_cents, consumed_cents FROM budget WHERE activity_id = $1", {a.id});
    if (!b.empty()) {
      out["budget_cents"] = b[0].i64(0);
      out["budget_used_cents"] = b[0].i64(1);
      out["budget_left_cents"] = b[0].i64(0) - b[0].i64(1);
    }
    json prizes = json::array();
    auto p = tx.query(
        "SELECT p.code, i.code, i.kind, p.amount, p.amount_max, p.stock_total, "
        "(SELECT COALESCE(SUM(s.remain), 0) FROM stock s WHERE s.prize_id = p.id), p.buckets, p.weight, "
        "p.consolation, p.blocked, i.channel FROM prize p JOIN item i ON i.id = p.item_id "
        "WHERE p.activity_id = $1 ORDER BY p.id",
        {a.id});
    for (auto& r : p.rows)
      prizes.push_back({{"prize", r.str(0)},
                        {"item", r.str(1)},
                        {"item_kind", r.str(2)},
                        {"amount", r.is_null(4) ? json(r.i64(3)) : json(std::to_string(r.i64(3)) + ".." + r.str(4))},
                        {"stock", r.i64(5)},
                        {"stock_left", r.i64(6)},
                        {"buckets", r.i64(7)},
                        {"weight", r.i64(8)},
                        {"consolation", r.i64(9) != 0},
                        {"blocked", r.i64(10) != 0},
                        {"channel", r.str(11)}});
    out["prizes"] = prizes;
    json reviews = json::array();
    auto rv = tx.query(
        "SELECT role, decision, operator, definition_hash, voided, comment, created_at FROM activity_review "
        "WHERE activity_id = $1 ORDER BY id",
        {a.id});
    for (auto& r : rv.rows)
      reviews.push_back({{"role", r.str(0)},
                         {"decision", r.str(1)},
                         {"operator", r.str(2)},
                         {"definition_hash", r.str(3)},
                         {"voided", r.i64(4) != 0},
                         {"comment", r.str_or(5, "")},
                         {"at", format_utc(r.i64(6))}});
    out["reviews"] = reviews;
    auto g = tx.query("SELECT count(*), COALESCE(SUM(cost_cents), 0) FROM grants WHERE activity_id = $1 AND state <> 'reversed'",
                      {a.id});
    out["grants"] = g[0].i64(0);
    out["granted_cost_cents"] = g[0].i64(1);
  });
  return out;
}

std::vector<json> list(store::Store& st, const std::optional<std::string>& state) {
  std::vector<json> out;
  std::string sql =
      "SELECT code, name, kind, state, timezone, start_at, end_at, version FROM activity" +
      std::string(state ? " WHERE state = $1" : "") + " ORDER BY id";
  store::Params p;
  if (state) p.push_back(*state);
  auto r = st.query(sql, p);
  for (auto& row : r.rows)
    out.push_back({{"code", row.str(0)},
                   {"name", row.str(1)},
                   {"kind", row.str(2)},
                   {"state", row.str(3)},
                   {"timezone", row.str(4)},
                   {"start", format_in_zone(row.i64(5), row.str(4))},
                   {"end", format_in_zone(row.i64(6), row.str(4))},
                   {"version", row.i64(7)}});
  return out;
}

std::vector<json> history(store::Store& st, const std::string& code) {
  std::vector<json> out;
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    auto a = get(tx, code);
    struct Ev {
      Millis at;
      int order;
      int64_t id;
      json j;
    };
    std::vector<Ev> evs;
    auto s = tx.query(
        "SELECT id, from_state, to_state, actor, reason, created_at FROM status_log WHERE entity = 'activity' "
        "AND entity_id = $1 ORDER BY id",
        {a.id});
    for (auto& r : s.rows)
      evs.push_back({r.i64(5), 0, r.i64(0),
                     {{"at", format_utc(r.i64(5))},
                      {"source", "status_log"},
                      {"actor", r.str(3)},
                      {"what", r.str_or(1, "(new)") + " -> " + r.str(2)},
                      {"from", r.is_null(1) ? json(nullptr) : json(r.str(1))},
                      {"to", r.str(2)},
                      {"detail", r.str_or(4, "")}}});
    auto au = tx.query(
        "SELECT id, operator, action, detail, created_at FROM audit WHERE entity = 'activity' AND entity_key = $1 "
        "ORDER BY id",
        {code});
    for (auto& r : au.rows)
      evs.push_back({r.i64(4), 1, r.i64(0),
                     {{"at", format_utc(r.i64(4))},
                      {"source", "audit"},
                      {"actor", r.str(1)},
                      {"what", r.str(2)},
                      {"detail", r.str_or(3, "")}}});
    std::stable_sort(evs.begin(), evs.end(), [](const Ev& x, const Ev& y) {
      if (x.at != y.at) return x.at < y.at;
      if (x.order != y.order) return x.order < y.order;
      return x.id < y.id;
    });
    for (auto& e : evs) out.push_back(std::move(e.j));
  });
  return out;
}

}  // namespace rc::activity
