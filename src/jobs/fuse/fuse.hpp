#pragma once
// The fuse (熔断): the circuit breaker that stops a misconfigured prize - an extra zero - within
// minutes, before the money is gone (DESIGN §6).
//
// A rule (from the activity's [[fuse]] tables, stored in fuse_rule) watches one prize or the whole
// activity over a window: an absolute cap on the count or on the amount issued; period-over-period
// (this window against the previous one, in percent); day-over-day (against the same window a day
// earlier); and a minimum volume below which the ratios are ignored (ten grants instead of five is
// noise, not a spike). A trip writes a fuse_event with its batch number and the figures that
// tripped it, and blocks the prize (prize.blocked) or the activity (the open event itself): the
// engine then holds claims on it as pending grants (reason held_by_fuse, core/engine/held.hpp). An
// operator decides: release (a false alarm: unblocked, the held requests go through the claim flow
// again) or confirm (stays blocked, the held requests are cancelled). `fuse block` is the manual
// kill switch.
//
// Every decision is one conditional update of the event (state tripped -> released) plus a
// status-log row and an audit row: two operators releasing at once release it once.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/alert_outbox.hpp"
#include "core/clock.hpp"
#include "core/engine/engine.hpp"
#include "core/states.hpp"
#include "core/store/store.hpp"
#include "jobs/runtime/runner.hpp"

namespace rc::jobs::fuse {

struct Figures {
  int64_t count = 0;
  int64_t amount = 0;  // cents: the cost of the grants
};

struct Event {
  int64_t id = 0;
  std::string batch_no, activity, prize;  // prize empty: the whole activity
  std::string rule;                       // rule name; "manual" for fuse block
  std::string kind;    // max_count | max_amount | pop | dod | manual
  FuseEventState state = FuseEventState::tripped;  // tripped (blocking) | released
  std::string decision;  // "", confirmed, false_alarm, unblocked
  Figures observed, compare;
  std::optional<int64_t> threshold;
  Millis window_from = 0, window_to = 0;
  std::string reason, decided_by, decision_reason;
  Millis created_at = 0;
  std::optional<Millis> decided_at;
  std::optional<int64_t> alert_id;  // a trip of this run: its queued alert
};

// A trip's alert ("alert": "fuse_tripped") is queued with its event, in the same transaction
// (core/alert_outbox.hpp), and posted right after the commit; pending alerts of any kind older
// than this grace (a process that died after its commit, a webhook that was down) are posted by
// every fuse-scan run after its rules. The grace is longer than a claim's capped post (1 s) and
// than the longest [alerts] timeout_ms an operator command waits (60 s).
constexpr Millis kAlertGraceMs = 90'000;
constexpr int64_t kAlertsPerRun = 100;

struct ScanOptions {
  // Posts an alert (the CLI's signed [alerts] webhook). Empty: none configured; alerts are then
  // recorded as skipped, and the ERROR line and the event are the record.
  AlertPoster post;
};

struct ScanResult {
  int64_t rules = 0;           // enabled rules of live or gray activities evaluated in this run
  int64_t already_tripped = 0; // skipped: an open event of the rule still blocks
  std::vector<Event> trips;    // tripped in this run (for a dry run: would have tripped)
  AlertCounts alerts;          // earlier alerts posted (or skipped, or failed again) by this run
  int64_t alerts_pending = 0;  // dry run: earlier alerts this run would post
};

// fuse-scan, as a job of the runner (jobs/runtime/runner.hpp: lease, job_run, pause switch, --dry-run,
// --limit, --max-runtime, signals): evaluates every enabled rule of every live or gray activity at
// run.now(), one rule per chunk (an item towards --limit). A trip writes the event and its
// status-log row and blocks the prize and queues the alert, in the chunk's transaction (rolled back
// under --dry-run), then logs an ERROR line and posts the alert. After the rules, while the run may
// go on, alerts pending for longer than kAlertGraceMs are posted, least tried first (counts
// alerts_sent, alerts_failed, alerts_skipped). A rule with an open (tripped) event is not evaluated again until that
// event is released. Counts: rules, tripped, already_tripped; the run's exit is findings (1) when
// any rule tripped. REQUIRES: run by run_job.
ScanResult scan(JobRun& run, const ScanOptions& o);

// The event as JSON: `fuse list/show` rows, and the body of its alert.
nlohmann::json event_json(const Event& e);

// The figures of the three windows for one rule, for tests and `fuse show`.
struct Windows {
  Figures current, previous, day_before;
};

std::vector<Event> list_events(store::Session& s, const std::optional<std::string>& state);
std::optional<Event> find_event(store::Session& s, const std::string& batch_or_id);

// The requests an event held, whatever became of them (grants.fuse_event_id), oldest first.
struct HeldRequest {
  std::string record_code, user, biz_id;
  GrantState state = GrantState::pending;
  std::string reason;
  Millis created_at = 0, updated_at = 0;
};
std::vector<HeldRequest> held_requests(store::Session& s, int64_t event_id);

// What a decision did to the requests the event held (engine/held.hpp).
struct HeldCounts {
  int64_t held = 0;        // dry run: pending grants the decision would take
  int64_t granted = 0;     // released: through the claim flow again, delivered
  int64_t rejected = 0;    // released, but the world changed: pending -> invalid with the reason
  int64_t still_held = 0;  // released, but another open event blocks them: they wait for it
  int64_t cancelled = 0;   // confirmed: pending -> cancelled
  int64_t decided = 0;     // moved first by someone else (a concurrent release or confirm)
  std::map<std::string, int64_t> reasons;  // rejected, per reason word
};

struct Decision {
  bool changed = false;  // false: already decided that way and nothing left held (idempotent), or dry run
  std::string message;
  Event event;
  HeldCounts held;
};
// release --false-alarm: tripped -> released, the prize or activity unblocked (unless another open
// event still blocks it), then each request the event holds goes through the claim flow again
// (Engine::release_held) and is delivered or rejected. Error(data) for an unknown event. Already
// released: only requests still held by it are finished (a release interrupted after its decision
// committed continues). A confirmed event cannot be released (Error(data)): use fuse unblock.
Decision release(engine::Engine& eng, const std::string& event, const std::string& reason, const std::string& actor,
                 Millis now, bool dry_run);
// confirm --reason: the event stays tripped (blocking) and is marked confirmed; the requests it holds
// go pending -> cancelled with the reason (also those held after an earlier confirm). Error(data)
// for a released event.
Decision confirm(store::Store& st, const std::string& event, const std::string& reason, const std::string& actor,
                 Millis now, bool dry_run);
// block ACTIVITY [--prize P]: a manual event that blocks like a tripped rule. Blocking what is
// already blocked by an open manual event: nothing to do.
Decision block(store::Store& st, const std::string& activity, const std::optional<std::string>& prize,
               const std::string& reason, const std::string& actor, Millis now, bool dry_run);
// unblock ACTIVITY [--prize P]: releases every open event on it (decision unblocked) and sends the
// requests they hold through the claim flow again, as release does.
Decision unblock(engine::Engine& eng, const std::string& activity, const std::optional<std::string>& prize,
                 const std::string& reason, const std::string& actor, Millis now, bool dry_run);

}  // namespace rc::jobs::fuse
