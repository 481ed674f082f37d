#pragma once
// rewardctl resend: the retry half of delivery, and its operator commands.
//
// A run claims, chunk by chunk, the resend bills that are due (PostgreSQL: FOR UPDATE SKIP LOCKED,
// so several hosts share the work and none waits on another) and the grants stranded in `init`
// longer than a grace period (a claim that crashed between its commit and its delivery). In the
// claim transaction a due bill is moved out of the way (its next attempt pushed past the delivery),
// a bill past its expiry goes to `manual`, and a bill whose grant already ended is closed. After the
// commit each claimed grant goes through Engine::deliver with the same bill number; the conditional
// move to `issuing` there decides, so two runs never deliver one bill twice. A failed attempt is
// rescheduled by the engine (60 s doubling to 1 h, with jitter); a final "no" fails the grant and
// releases what it held (core/engine/release.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/engine.hpp"
#include "jobs/runtime/runner.hpp"

namespace rc::jobs {

struct ResendOptions {
  int64_t chunk = 100;                   // bills (or stranded grants) claimed per transaction
  int64_t init_grace_ms = 5 * 60'000;    // a grant in init this long is stranded
  double rate_per_second = 0;            // per channel; 0 = no cap
  int64_t claim_hold_ms = 5 * 60'000;    // a claimed bill is due again after this if its run dies
};

// Counts: delivered, rescheduled, failed, handed_over (outbox), manual, closed, skipped, errors;
// under --dry-run: due, would_manual, stranded. REQUIRES: run by run_job.
void resend(JobRun& run, engine::Engine& eng, const ResendOptions& o);

struct ResendBill {
  int64_t id = 0, grant_id = 0;
  std::string bill_no, record_code, activity, user, channel;
  ResendState state = ResendState::pending;
  GrantState grant_state = GrantState::init;
  int64_t attempts = 0;
  Millis next_attempt_at = 0, expires_at = 0, updated_at = 0;
  std::optional<std::string> last_error;
};

// Bills of one state (pending | manual | done; all when empty) and activity code (all when empty),
// oldest due first, at most `limit`. Throws Error(usage) for another state.
std::vector<ResendBill> list_resend(store::Store& s, const std::string& state, const std::string& activity,
                                    int64_t limit);

struct ResendChange {
  bool changed = false;
  std::string message;
  std::optional<ResendBill> bill;
};

// manual -> pending, due now, with a fresh expiry (now + expiry_ms). A pending bill is made due now.
// Throws Error(data) for an unknown bill.
ResendChange retry_resend(store::Store& s, const std::string& bill_no, const std::string& actor, Millis now,
                          int64_t expiry_ms, bool dry_run);

// Gives up a delivery: the bill -> done (reason recorded), its grant delayed_resend -> failed, and
// the grant's stock, budget and limit counts released, exactly once. Refused (changed = false) for a
// grant in any other state (delivered, or a delivery in flight). Throws Error(data) for an unknown bill.
ResendChange abandon_resend(store::Store& s, const std::string& bill_no, const std::string& reason,
                            const std::string& actor, Millis now, bool dry_run);

}  // namespace rc::jobs
