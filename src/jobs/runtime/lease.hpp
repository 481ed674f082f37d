#pragma once
// The lease that keeps two runs of an exclusive job apart, across hosts (docs/design.md §9.3).
// Two parts:
//   the claim  - who may start. PostgreSQL with a direct connection: a session advisory lock on a
//                connection of its own (the server frees it when the session ends, so a SIGKILLed
//                run never blocks the next one), keyed by schema and key; advisory locks are per
//                database, and two rewardctl schemas in one database must not block each other.
//                PostgreSQL behind a pooler in transaction mode (no session survives a
//                transaction): the job_lock row itself, taken when it is absent or expired, kept
//                alive by a heartbeat every third of db.lease_ttl_ms; a holder that dies blocks the
//                next run until its row expires. SQLite: flock(LOCK_EX) on a file beside the
//                database, DB.job-KEY.lock (the kernel frees it when the process ends; the file is
//                never removed: removing a lock file races).
//   the fence  - what stops a run that lost its claim (its lock's session was terminated, its row
//                expired): every write transaction of the run first updates its job_lock rows
//                (lease_fence), and finds them gone when a later run has taken the lease; it then
//                throws Error(busy) "lease lost" before anything of that transaction commits. A
//                later run's takeover waits for the row lock of a transaction that passed the
//                fence, so two runs' writes never overlap.
// job_lock also names the holder to a second run (host, pid, run).
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::jobs {

class Lease {
 public:
  virtual ~Lease() = default;  // releases the lease
};

// Whether leases are job_lock rows with an expiry (a pooler in transaction mode) rather than
// session advisory locks or lock files.
inline bool row_leases(const store::Dsn& dsn, const store::StoreOptions& o) {
  return dsn.dialect == store::Dialect::postgres && o.pooled;
}

// SQL for the database's wall clock in epoch milliseconds (PostgreSQL): row leases expire by it.
extern const char* const kDbNowMs;

// Takes the claim on `key` without waiting: nullptr when another process holds it. Throws
// Error(unavailable) when the lock file cannot be created or the server cannot be reached.
// REQUIRES: !row_leases(dsn, o) (a row lease is taken by the transaction that writes job_lock).
std::unique_ptr<Lease> try_lease(const store::Dsn& dsn, const store::StoreOptions& o, const std::string& key);

// Row leases: removes the row of `key` when it has expired and answers true, or answers false at
// once when it is live (held). The caller then inserts its own row with ON CONFLICT DO NOTHING in
// the same transaction: 0 rows means another holder got there first.
bool clear_row_lease(store::Tx& tx, const std::string& key);

// A row lease outside the job runner (the drill's scratch database): a job_lock row of `key` named
// `holder` (unique to this process), taken when absent or expired, beaten every ttl_ms / 3 and
// deleted when the result is destroyed; nullptr when another holder has it. REQUIRES:
// row_leases(dsn, o), job_lock exists in st (migrated), `st` outlives the result.
std::unique_ptr<Lease> try_row_lease(store::Store& st, const store::Dsn& dsn, const store::StoreOptions& o,
                                     const std::string& key, const std::string& holder, int64_t ttl_ms);

// True when some process holds `key` right now: probed by taking and releasing it, or, for row
// leases, a job_lock row of `key` that has not expired by the database's clock (read through st).
bool lease_held(const store::Dsn& dsn, const store::StoreOptions& o, store::Store& st, const std::string& key);

// This host's name, as job_lock and job_run record it ("unknown" when it cannot be read).
std::string host_name();

// The SQLite lock file of `key` for database path `db_path`.
std::string lease_file(const std::string& db_path, const std::string& key);

// The fence of run `run_id` holding `keys` job_lock rows: throws Error(busy) "lease lost" naming
// the first key when fewer of its rows are left. ttl_ms > 0 (row leases): it also extends their
// expiry to the database's now + ttl_ms (row leases expire by the database's clock, so that hosts
// whose clocks differ agree on it).
std::shared_ptr<const store::Store::Fence> lease_fence(int64_t run_id, std::vector<std::string> keys, int64_t ttl_ms);

// Row leases' heartbeat: on a connection of its own, every ttl_ms / 3 extends the run's job_lock
// rows to now + ttl_ms, until destroyed. A beat that finds the rows gone stops beating (the fence
// then stops the run at its next transaction); a beat that fails is retried at the next.
class Heartbeat {
 public:
  Heartbeat(const store::Dsn& dsn, const store::StoreOptions& o, int64_t run_id, int64_t ttl_ms);
  // The general form: `sql` takes ($1 = id, $2 = the new expiry) and answers the rows it kept alive;
  // `who` names the holder in the log.
  Heartbeat(const store::Dsn& dsn, const store::StoreOptions& o, std::string sql, store::Value id, std::string who,
            int64_t ttl_ms);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rc::jobs
