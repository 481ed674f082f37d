#include "core/engine/catalog.hpp"

#include <spdlog/spdlog.h>

#include "core/activity/definition.hpp"

namespace rc::engine {

const PrizeInfo* ActivityCatalog::prize(const std::string& code) const {
  for (auto& p : prizes)
    if (p.code == code) return &p;
  return nullptr;
}

std::shared_ptr<const ActivityCatalog> load_catalog(store::Session& s, int64_t activity_id) {
  auto c = std::make_shared<ActivityCatalog>();
  auto a = s.query(
      "SELECT id, version, code, kind, timezone, whitelist_required, user_limit, user_limit_period, definition, "
      "(SELECT count(*) FROM budget b WHERE b.activity_id = activity.id), "
      "(SELECT count(*) FROM budget b WHERE b.activity_id = activity.id AND (b.warn_ppm IS NOT NULL OR "
      "b.degrade_ppm IS NOT NULL OR b.stop_ppm IS NOT NULL)) FROM activity WHERE id = $1",
      {activity_id});
  if (a.empty()) throw Error(Errc::internal, "activity vanished while loading");
  const auto& r = a[0];
  c->id = r.i64(0);
  c->version = r.i64(1);
  c->code = r.str(2);
  c->kind = state_from_db<activity::Kind>(r.str(3));
  c->timezone = r.str(4);
  c->whitelist_required = r.i64(5) != 0;
  c->limit = r.opt_i64(6);
  if (auto p = r.opt_str(7)) c->limit_period = parse_period(*p).value_or(Period::total);
  c->has_budget = r.i64(9) > 0;
  c->has_ladder = r.i64(10) > 0;
  const std::string definition = r.str(8);  // the stored, reviewed version's text
  auto ps = s.query(
      "SELECT p.id, p.code, i.code, i.kind, i.channel, p.amount, p.amount_max, i.unit_cost_cents, p.buckets, "
      "p.user_limit, p.user_limit_period, p.weight, p.consolation, p.validity_days, p.high_value "
      "FROM prize p JOIN item i ON i.id = p.item_id WHERE p.activity_id = $1 AND p.retired = 0 "
      "ORDER BY p.position, p.id",
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
    p.high_value = row.i64(14) != 0;
    if (p.consolation) c->consolation = c->prizes.size();
    weights.push_back(p.weight);
    c->prizes.push_back(std::move(p));
  }
  c->pool = WeightedPool(weights);
  if (c->kind == activity::Kind::lottery) {
    // Guarantees live only in the definition text: read them from the stored, reviewed version.
    auto parsed = activity::parse_definition(definition, c->code);
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

}  // namespace rc::engine
