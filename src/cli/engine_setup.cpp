// Builds the engine's options from the settings: the actor, the configured channels, and the alert
// a budget ladder step sends.
#include "cli/engine_setup.hpp"

#include <cstdlib>

#include "jobs/alert.hpp"

namespace rc::cli {

engine::EngineOptions engine_options(Ctx& ctx) {
  engine::EngineOptions o;
  o.actor = ctx.settings.operator_name;
  o.channels = delivery::parse_channels(ctx.settings);
  o.getenv = [](const char* n) { return std::getenv(n); };
  // A budget ladder step (engine/budget_ladder.hpp) alerts through the same signed [alerts] webhook
  // as fuse-scan and reconcile; without one, its WARN line and status-log row are the record.
  if (auto alerts = jobs::parse_alerts(ctx.settings))
    o.on_ladder = [cfg = *alerts, getenv = o.getenv](const engine::LadderMove& m) {
      auto ratio = [](std::optional<int64_t> ppm) {
        return ppm ? nlohmann::json(double(*ppm) / 1e6) : nlohmann::json(nullptr);
      };
      jobs::post_alert(cfg, getenv,
                       {{"alert", "budget_ladder"},
                        {"activity", m.activity},
                        {"from", engine::ladder_step_name(m.from)},
                        {"to", engine::ladder_step_name(m.to)},
                        {"consumed_cents", m.consumed_cents},
                        {"authorised_cents", m.authorised_cents},
                        {"warn_at", ratio(m.ratios.warn)},
                        {"degrade_at", ratio(m.ratios.degrade)},
                        {"stop_at", ratio(m.ratios.stop)},
                        {"at", format_utc(m.at)},
                        {"message", engine::describe(m)}});
    };
  return o;
}

}  // namespace rc::cli
