// Builds the engine's options from the settings: the actor and the configured channels.
#include "cli/engine_setup.hpp"

#include <cstdlib>

namespace rc::cli {

engine::EngineOptions engine_options(Ctx& ctx) {
  engine::EngineOptions o;
  o.actor = ctx.settings.operator_name;
  o.channels = delivery::parse_channels(ctx.settings);
  o.getenv = [](const char* n) { return std::getenv(n); };
  return o;
}

}  // namespace rc::cli
