// Builds the engine's options from the settings: the actor, the configured channels, and the alert
// a budget ladder step sends.
#include "cli/engine_setup.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "jobs/runtime/alert.hpp"

namespace rc::cli {

AlertPoster alert_poster(Ctx& ctx, int max_timeout_ms) {
  auto alerts = jobs::parse_alerts(ctx.settings);
  if (!alerts) return {};
  if (max_timeout_ms > 0) alerts->timeout_ms = std::min(alerts->timeout_ms, max_timeout_ms);
  return [cfg = *alerts](const nlohmann::json& body) {
    return jobs::post_alert(cfg, [](const char* n) { return std::getenv(n); }, body);
  };
}

AlertPoster alert_poster_or_none(Ctx& ctx, int max_timeout_ms) {
  // A broken [alerts] table never stops a payout or a budget change (nor adds an error line to each):
  // its alerts are left pending for fuse-scan, which refuses to run with it (exit 78), so the cron
  // wrapper says so.
  try {
    return alert_poster(ctx, max_timeout_ms);
  } catch (const Error& e) {
    spdlog::debug("[alerts] not usable here, alerts are left for fuse-scan: {}", e.what());
    return {};
  }
}

engine::EngineOptions engine_options(Ctx& ctx) {
  engine::EngineOptions o;
  o.actor = ctx.settings.operator_name;
  o.channels = delivery::parse_channels(ctx.settings);
  o.getenv = [](const char* n) { return std::getenv(n); };
  // A budget ladder step (engine/budget_ladder.hpp) alerts through the same signed [alerts] webhook
  // as fuse-scan. The claim that crossed the step posts it with at most kClaimAlertTimeoutMs, so a
  // slow webhook barely delays its answer; what it could not post, fuse-scan posts.
  o.post_alert = alert_poster_or_none(ctx, kClaimAlertTimeoutMs);
  return o;
}

}  // namespace rc::cli
