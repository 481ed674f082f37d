#pragma once
// rewardctl expire: the time-driven state changes, each one conditional update (WHERE state =
// <expected>) with its status-log row, so a rerun, an overlap or a crash never applies one twice:
//   activities   live | paused | gray -> ended once end_at has passed, with a settlement row in
//                the audit (stock left per prize, budget authorised / consumed / left, grants by state);
//   qualifications unused -> expired once expires_at has passed;
//   grants       pending -> expired once expires_at has passed. A pending grant (held by a fuse)
//                has taken no stock, budget or limit count, so there is nothing to give back.
// Each scan walks the due rows only, in (due time, id) order through an index that holds only
// candidates, with a keyset cursor: its cost follows the due rows, not the table, and a dry run
// (whose chunks roll back) walks the same rows and reports the same counts.
#include <cstdint>

#include "jobs/runtime/runner.hpp"

namespace rc::jobs {

struct ExpireOptions {
  int64_t chunk = 500;  // rows per transaction
};

// Counts: activities_ended, qualifications_expired, grants_expired. REQUIRES: run by run_job.
void expire(JobRun& run, const ExpireOptions& o);

}  // namespace rc::jobs
