#include "core/engine/grant_view.hpp"

namespace rc::engine {

const char* kGrantSelect =
    "SELECT g.id, g.record_code, g.biz_id, a.code, p.code, g.user_id, g.state, i.code, i.kind, g.channel, g.amount, "
    "g.cost_cents, g.bill_no, dp.code, g.source, g.reason, g.draw_value, g.pool_version, g.bucket, g.created_at, "
    "g.updated_at FROM grants g JOIN activity a ON a.id = g.activity_id LEFT JOIN prize p ON p.id = g.prize_id "
    "LEFT JOIN item i ON i.id = p.item_id LEFT JOIN prize dp ON dp.id = g.degraded_from ";

GrantView to_view(const store::Row& r) {
  GrantView g;
  g.id = r.i64(0);
  g.record_code = r.str(1);
  g.biz_id = r.str(2);
  g.activity = r.str(3);
  g.prize = r.str_or(4, "");
  g.user = r.str(5);
  g.state = state_from_db<GrantState>(r.str(6));
  g.item = r.str_or(7, "");
  g.item_kind = r.str_or(8, "");
  g.channel = r.str_or(9, "");
  g.amount = r.i64(10);
  g.cost_cents = r.i64(11);
  g.bill_no = r.opt_str(12);
  g.degraded_from = r.opt_str(13);
  g.source = r.opt_str(14);
  g.reason = r.opt_str(15);
  g.draw_value = r.opt_i64(16);
  g.pool_version = r.opt_i64(17);
  g.bucket = r.opt_i64(18);
  g.created_at = r.i64(19);
  g.updated_at = r.i64(20);
  return g;
}

static std::optional<GrantView> one(store::Session& s, const std::string& where, const std::string& key) {
  auto r = s.query(std::string(kGrantSelect) + where, {key});
  if (r.empty()) return std::nullopt;
  return to_view(r[0]);
}

std::optional<GrantView> find_grant(store::Session& s, const std::string& record_code) {
  return one(s, "WHERE g.record_code = $1", record_code);
}

std::string current_state(store::Session& s, int64_t grant_id) {
  auto r = s.query("SELECT state FROM grants WHERE id = $1", {grant_id});
  return r.empty() ? std::string("gone") : r[0].str(0);
}

std::optional<GrantView> find_grant_by_biz(store::Session& s, const std::string& biz_id) {
  return one(s, "WHERE g.biz_id = $1", biz_id);
}

std::optional<GrantView> find_grant_by_bill(store::Session& s, const std::string& bill_no) {
  // delivery_bill.bill_no is the unique key: find the grant through it
  return one(s, "WHERE g.id = (SELECT grant_id FROM delivery_bill WHERE bill_no = $1)", bill_no);
}

std::vector<GrantView> grants_of_user(store::Session& s, const std::string& user,
                                      const std::optional<std::string>& activity) {
  auto r = activity ? s.query(std::string(kGrantSelect) + "WHERE g.user_id = $1 AND a.code = $2 ORDER BY g.id",
                              {user, *activity})
                    : s.query(std::string(kGrantSelect) + "WHERE g.user_id = $1 ORDER BY g.id", {user});
  std::vector<GrantView> out;
  for (auto& row : r.rows) out.push_back(to_view(row));
  return out;
}

}  // namespace rc::engine
