#pragma once
// The engine as this host runs it: options built from the layered settings.
#include "cli/context.hpp"
#include "core/engine/engine.hpp"

namespace rc::cli {

// Posts an alert body to the signed [alerts] webhook; empty when the config has none. Throws
// Error(config) for a bad [alerts] table.
AlertPoster alert_poster(Ctx& ctx);

// The actor (--operator), the configured [channels] (plus the built-in ledger and outbox) and the
// environment for channel secrets. Throws Error(config) for a bad [channels] table.
engine::EngineOptions engine_options(Ctx& ctx);

}  // namespace rc::cli
