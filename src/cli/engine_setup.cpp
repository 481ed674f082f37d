// Builds the engine's options from the settings: the actor, the configured channels, and the alert
// a budget ladder step sends.
#include "cli/engine_setup.hpp"

#include <cstdlib>

#include "jobs/alert.hpp"

namespace rc::cli {

AlertPoster alert_poster(Ctx& ctx) {
  auto alerts = jobs::parse_alerts(ctx.settings);
  if (!alerts) return {};
  return [cfg = *alerts](const nlohmann::json& body) {
    return jobs::post_alert(cfg, [](const char* n) { return std::getenv(n); }, body);
  };
}

engine::EngineOptions engine_options(Ctx& ctx) {
  engine::EngineOptions o;
  o.actor = ctx.settings.operator_name;
  o.channels = delivery::parse_channels(ctx.settings);
  o.getenv = [](const char* n) { return std::getenv(n); };
  // A budget ladder step (engine/budget_ladder.hpp) alerts through the same signed [alerts] webhook
  // as fuse-scan and reconcile; without one, its WARN line and status-log row are the record.
  o.post_alert = alert_poster(ctx);
  return o;
}

}  // namespace rc::cli
