#include "core/engine/grant_json.hpp"

namespace rc::engine {

using nlohmann::json;

json grant_json(const GrantView& g) {
  json j{{"record_code", g.record_code},
         {"biz_id", g.biz_id},
         {"activity", g.activity},
         {"user", g.user},
         {"prize", g.prize},
         {"item", g.item},
         {"item_kind", g.item_kind},
         {"amount", g.amount},
         {"cost_cents", g.cost_cents},
         {"state", g.state},
         {"channel", g.channel},
         {"bill_no", g.bill_no ? json(*g.bill_no) : json(nullptr)},
         {"created_at", format_utc(g.created_at)},
         {"updated_at", format_utc(g.updated_at)}};
  if (g.degraded_from) j["degraded_from"] = *g.degraded_from;
  if (g.draw_value) j["draw_value"] = *g.draw_value;
  if (g.pool_version) j["pool_version"] = *g.pool_version;
  if (g.source) j["source"] = *g.source;
  if (g.reason) j["reason"] = *g.reason;
  return j;
}

}  // namespace rc::engine
