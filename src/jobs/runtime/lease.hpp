#pragma once
// The lease that keeps two runs of an exclusive job apart, across hosts, and that the system frees
// when its holder dies (so a SIGKILLed run never blocks the next one):
//   PostgreSQL: a session advisory lock on a connection of its own (the server frees it when the
//               session ends), keyed by schema and key: advisory locks are per database, and two
//               rewardctl schemas in one database must not block each other;
//   SQLite:     flock(LOCK_EX) on a file beside the database, DB.job-KEY.lock (the kernel frees it
//               when the process ends). The file is never removed: removing a lock file races.
// Who holds it is recorded separately, in job_lock, only to name the holder to a second run.
#include <memory>
#include <string>

#include "core/store/store.hpp"

namespace rc::jobs {

class Lease {
 public:
  virtual ~Lease() = default;  // releases the lease
};

// Takes the lease `key` without waiting: nullptr when another process holds it. Throws
// Error(unavailable) when the lock file cannot be created or the server cannot be reached.
std::unique_ptr<Lease> try_lease(const store::Dsn& dsn, const std::string& key);

// True when some process holds `key` right now (probed by taking and releasing it).
bool lease_held(const store::Dsn& dsn, const std::string& key);

// The SQLite lock file of `key` for database path `db_path`.
std::string lease_file(const std::string& db_path, const std::string& key);

}  // namespace rc::jobs
