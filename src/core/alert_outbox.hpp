#pragma once
// Alerts that survive a crash (a transactional outbox, sql/0011_alert_outbox.sql).
//
// An alert reports a change: a budget ladder step going up (engine/budget_ladder.hpp), a fuse trip
// (jobs/fuse/fuse.hpp). It is queued with queue_alert in the transaction that makes that change, so the
// change and its alert commit together or not at all. After the commit the process that made it
// posts it (deliver_alert); a process killed in between leaves it pending, and `fuse-scan` posts
// what is still pending after a grace period (deliver_pending). Delivery is at least once: the
// grace keeps fuse-scan away from an alert its own process is still posting, and a receiver that
// must not count twice can use the alert's "alert_id".
//
// States: pending -> sent (the poster said yes) | skipped (fuse-scan has no [alerts] webhook
// either, so the log line and the status-log row are the record) | failed (kMaxAlertAttempts posts
// were refused). Each move is one conditional update plus one status-log row (entity "alert"). A
// failed post keeps the alert pending, counting attempts and keeping the last error; a process
// without a webhook leaves its alert pending for fuse-scan, whose configuration decides.
// fuse-scan takes the least-tried alerts first, so a poisoned one never holds back a new one.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc {

// Posts one alert body; true when the receiver accepted it. Must not throw for a failed post (it
// may throw for a bad configuration, which is then the alert's last error). Empty: not configured.
using AlertPoster = std::function<bool(const nlohmann::json& body)>;

// Queues `body` (an object; "alert" = kind and "alert_id" are added). REQUIRES: inside the
// transaction of the change it reports. Returns the alert's id.
int64_t queue_alert(store::Session& s, const std::string& kind, std::optional<int64_t> activity_id,
                    nlohmann::json body, Millis now);

constexpr int64_t kMaxAlertAttempts = 20;  // refused this often: the alert is given up (failed)

// retrying: a post failed, the alert stays pending; left: no poster here, left pending for
// fuse-scan; given_up: the last allowed attempt failed; gone: not pending (delivered by another).
enum class AlertResult { sent, skipped, retrying, left, given_up, gone };

// Posts pending alert `id` outside any transaction, then records the outcome in its own short
// transaction. Without a poster: `final` (fuse-scan) records it skipped, otherwise it is left
// pending. Never throws for a failed post (an ERROR line names it).
AlertResult deliver_alert(store::Store& st, int64_t id, const AlertPoster& post, const std::string& actor,
                          Millis now, bool final = false);

struct AlertCounts {
  int64_t sent = 0, skipped = 0, failed = 0;  // failed: still pending (or given up) after this post
};

// Delivers (final) the pending alerts created at or before `created_before`, least tried and then
// oldest first, at most `limit`, while `more()` says the run may go on (a time budget, a signal).
AlertCounts deliver_pending(store::Store& st, const AlertPoster& post, const std::string& actor, Millis now,
                            Millis created_before, int64_t limit, const std::function<bool()>& more);

// How many alerts are pending (for job metrics and `fuse-scan --dry-run`).
int64_t pending_alerts(store::Session& s, Millis created_before);

}  // namespace rc
