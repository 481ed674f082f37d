#pragma once
// The one batch loop of every long job: import-qualifications, qualification revoke and the job
// runner's chunks (expire, resend, and the jobs that follow). A batch is one write transaction.
// When the store retries it (busy, serialization failure, deadlock), the batch must start again
// exactly where it started the first time - the input rewound to the last committed row, its
// counters back to their committed values - so `rewind` runs before the body runs again. After a
// committed batch the caller checks for SIGINT/SIGTERM, so a signal always stops at a committed
// boundary.
#include <functional>

#include "core/store/store.hpp"

namespace rc::jobs {

// Runs body in one write transaction; calls rewind before every rerun of body (not before the
// first). Throws what transact throws (Error(unavailable) once the retries are used up).
void transact_batch(store::Store& s, const std::function<void()>& rewind,
                    const std::function<void(store::Tx&)>& body);

}  // namespace rc::jobs
