#pragma once
// Alerts from the jobs (a fuse trip, a reconcile summary): a JSON POST to `[alerts] webhook`,
// signed exactly like the webhook delivery channel - header "X-Rewardctl-Signature: sha256=<hex>",
// HMAC-SHA256 of the body under the secret - so a receiver verifies both the same way.
//
//   [alerts]
//   webhook = "https://ops.example.com/rewardctl"
//   secret = "env:REWARDCTL_ALERT_SECRET"   # a reference, never the secret itself
//   timeout_ms = 3000
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.hpp"

namespace rc::jobs {

struct AlertConfig {
  std::string url, secret_ref;
  int timeout_ms = 3000;
  std::string signature_header = "X-Rewardctl-Signature";
};

// The [alerts] table, or nullopt when the config has none. Error(config) naming file:line:column for
// an unknown key, a wrong type, a missing webhook or secret, or a literal secret.
std::optional<AlertConfig> parse_alerts(const Settings& s);

// Posts `body` (a JSON object; "v":1 is added) signed with the resolved secret. Never throws for a
// delivery problem: an alert that cannot be sent is logged as an error and returns false (the job's
// own exit code already says what happened).
bool post_alert(const AlertConfig& cfg, const GetEnv& getenv, nlohmann::json body);

}  // namespace rc::jobs
