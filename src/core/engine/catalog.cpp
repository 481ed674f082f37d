#include <spdlog/spdlog.h>

#include "core/activity/definition.hpp"
#include "core/engine/internal.hpp"
#include "core/hash.hpp"

namespace rc::engine {

const PrizeInfo* ActivityCatalog::prize(const std::string& code) const {
  for (auto& p : prizes)
    if (p.code == code) return &p;
  return nullptr;
}

std::string scope_activity(int64_t id) { return "a:" + std::to_string(id); }
std::string scope_prize(int64_t id) { return "p:" + std::to_string(id); }
std::string scope_draws(int64_t id) { return "d:" + std::to_string(id); }

int64_t preferred_bucket(const std::string& user, int64_t buckets) {
  return buckets <= 1 ? 0 : int64_t(stable_hash(user) % uint64_t(buckets));
}

std::string ledger_asset(const std::string& item_kind, const std::string& item_code) {
  if (item_kind == "cash" || item_kind == "points") return item_kind;
  return item_kind + ":" + item_code;
}

std::shared_ptr<const ActivityCatalog> load_catalog(store::Session& s, int64_t activity_id) {
  auto c = std::make_shared<ActivityCatalog>();
  auto a = s.query(
      "SELECT id, version, code, kind, timezone, whitelist_required, user_limit, user_limit_period, definition, "
      "(SELECT count(*) FROM budget b WHERE b.activity_id = activity.id) FROM activity WHERE id = $1",
      {activity_id});
  if (a.empty()) throw Error(Exit::internal, "activity vanished while loading");
  const auto& r = a[0];
  c->id = r.i64(0);
  c->version = r.i64(1);
  c->code = r.str(2);
  c->kind = r.str(3);
  c->timezone = r.str(4);
  c->whitelist_required = r.i64(5) != 0;
  c->limit = r.opt_i64(6);
  if (auto p = r.opt_str(7)) c->limit_period = parse_period(*p).value_or(Period::total);
  c->has_budget = r.i64(9) > 0;
  auto ps = s.query(
      "SELECT p.id, p.code, i.code, i.kind, i.channel, p.amount, p.amount_max, i.unit_cost_cents, p.buckets, "
      "p.user_limit, p.user_limit_period, p.weight, p.consolation, p.validity_days "
      "FROM prize p JOIN item i ON i.id = p.item_id WHERE p.activity_id = $1 ORDER BY p.id",
      {activity_id});
  std::vector<int64_t> weights;
  for (auto& row : ps.rows) {
    PrizeInfo p;
    p.id = row.i64(0);
    p.code = row.str(1);
    p.item = row.str(2);
    p.item_kind = row.str(3);
    p.channel = row.str(4);
    p.amount = row.i64(5);
    p.amount_max = row.opt_i64(6);
    p.unit_cost_cents = row.i64(7);
    p.buckets = std::max<int64_t>(1, row.i64(8));
    p.limit = row.opt_i64(9);
    if (auto per = row.opt_str(10)) p.limit_period = parse_period(*per).value_or(Period::total);
    p.weight = row.i64(11);
    p.consolation = row.i64(12) != 0;
    p.validity_days = row.opt_i64(13);
    if (p.consolation) c->consolation = c->prizes.size();
    weights.push_back(p.weight);
    c->prizes.push_back(std::move(p));
  }
  c->pool = WeightedPool(weights);
  if (c->kind == "lottery") {
    // Guarantees live only in the definition text: read them from the stored, reviewed version.
    auto parsed = activity::parse_definition(r.str(8), c->code);
    if (parsed.def) {
      for (auto& g : parsed.def->guarantees) {
        for (size_t i = 0; i < c->prizes.size(); ++i)
          if (c->prizes[i].code == g.prize) c->guarantees[g.nth] = i;
      }
    } else {
      spdlog::warn("activity {}: stored definition no longer parses; guarantees ignored", c->code);
    }
  }
  return c;
}

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
  g.state = r.str(6);
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

std::optional<GrantView> find_grant(store::Session& s, const std::string& record_code) {
  auto r = s.query(std::string(kGrantSelect) + "WHERE g.record_code = $1", {record_code});
  if (r.empty()) return std::nullopt;
  return to_view(r[0]);
}

std::optional<GrantView> find_grant_by_biz(store::Session& s, const std::string& biz_id) {
  auto r = s.query(std::string(kGrantSelect) + "WHERE g.biz_id = $1", {biz_id});
  if (r.empty()) return std::nullopt;
  return to_view(r[0]);
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

const char* status_name(Status s) {
  switch (s) {
    case Status::granted: return "granted";
    case Status::replayed: return "replayed";
    case Status::rejected: return "rejected";
  }
  return "?";
}

}  // namespace rc::engine
