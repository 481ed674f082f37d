#pragma once
// The engine as this host runs it: options built from the layered settings.
#include "cli/context.hpp"
#include "core/engine/engine.hpp"

namespace rc::cli {

// Posts an alert body to the signed [alerts] webhook, waiting at most max_timeout_ms when above 0
// (else [alerts] timeout_ms); empty when the config has none. Throws Error(config) for a bad
// [alerts] table.
AlertPoster alert_poster(Ctx& ctx, int max_timeout_ms = 0);

// alert_poster, or empty (alerts left pending for fuse-scan) when the [alerts] table is broken.
AlertPoster alert_poster_or_none(Ctx& ctx, int max_timeout_ms = 0);

// The longest a claim (or a list-issue chunk, a fuse release) waits for its ladder alert's post.
constexpr int kClaimAlertTimeoutMs = 1000;

// The actor (--operator), the configured [channels] (plus the built-in ledger and outbox) and the
// environment for channel secrets. Throws Error(config) for a bad [channels] table.
engine::EngineOptions engine_options(Ctx& ctx);

}  // namespace rc::cli
