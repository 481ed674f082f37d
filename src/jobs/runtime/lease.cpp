#include "jobs/runtime/lease.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace rc::jobs {
namespace {

class FileLease : public Lease {
 public:
  explicit FileLease(int fd) : fd_(fd) {}
  ~FileLease() override { ::close(fd_); }  // closing the descriptor drops the flock

 private:
  int fd_;
};

// Row leases expire by the database's clock, read in the statement: hosts whose clocks differ (and
// a run under REWARDCTL_NOW) agree on when a row has expired.
#define DB_NOW_MS "CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT)"

}  // namespace

const char* const kDbNowMs = DB_NOW_MS;

namespace {

const char* kAdvisoryKey = "7261748, hashtext(current_schema() || '/' || $1::text)";

class PgLease : public Lease {
 public:
  PgLease(std::unique_ptr<store::Store> s, std::string key) : s_(std::move(s)), key_(std::move(key)) {}
  ~PgLease() override {
    try {
      s_->autocommit().query(std::string("SELECT pg_advisory_unlock(") + kAdvisoryKey + ")", {key_});
    } catch (...) {
      // the session ends with the store below, which frees the lock anyway
    }
  }

 private:
  std::unique_ptr<store::Store> s_;
  std::string key_;
};

// A job_lock row with an expiry, kept alive by a heartbeat and deleted when destroyed.
class RowLease : public Lease {
 public:
  RowLease(store::Store& st, const store::Dsn& dsn, const store::StoreOptions& o, std::string key, std::string holder,
           int64_t ttl_ms)
      : st_(st), key_(std::move(key)), holder_(std::move(holder)),
        beat_(dsn, o, "UPDATE job_lock SET expires_at = " DB_NOW_MS " + $2 WHERE holder = $1", store::Value(holder_),
              "lease '" + key_ + "'", ttl_ms) {}
  ~RowLease() override {
    try {
      st_.autocommit().exec("DELETE FROM job_lock WHERE name = $1 AND holder = $2", {key_, holder_});
    } catch (...) {
      // the row expires by itself
    }
  }

 private:
  store::Store& st_;
  std::string key_, holder_;
  Heartbeat beat_;
};

}  // namespace

bool clear_row_lease(store::Tx& tx, const std::string& key) {
  // A plain read first: it never waits, and a live row (even one a running holder is extending in
  // an open transaction) answers "held" at once rather than after a lock timeout.
  if (!tx.query(std::string("SELECT 1 FROM job_lock WHERE name = $1 AND expires_at > ") + kDbNowMs, {key}).empty())
    return false;
  tx.exec(std::string("DELETE FROM job_lock WHERE name = $1 AND expires_at <= ") + kDbNowMs, {key});
  return true;
}

std::unique_ptr<Lease> try_row_lease(store::Store& st, const store::Dsn& dsn, const store::StoreOptions& o,
                                     const std::string& key, const std::string& holder, int64_t ttl_ms) {
  bool taken = false;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    taken = clear_row_lease(tx, key) && tx.exec("INSERT INTO job_lock (name, holder, acquired_at, expires_at, host, pid) "
                    "VALUES ($1, $2, " DB_NOW_MS ", " DB_NOW_MS " + $3, $4, $5) ON CONFLICT (name) DO NOTHING",
                    {key, holder, ttl_ms, host_name(), int64_t(::getpid())}) == 1;
  });
  if (!taken) return nullptr;
  return std::make_unique<RowLease>(st, dsn, o, key, holder, ttl_ms);
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string lease_file(const std::string& db_path, const std::string& key) {
  std::string k;
  for (char c : key) k += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return db_path + ".job-" + k + ".lock";
}

std::unique_ptr<Lease> try_lease(const store::Dsn& dsn, const store::StoreOptions& opts, const std::string& key) {
  if (dsn.dialect == store::Dialect::sqlite) {
    std::string path = lease_file(dsn.target, key);
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw Error(Errc::unavailable, "cannot open the job lock file " + path + ": " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int e = errno;
      ::close(fd);
      if (e == EWOULDBLOCK) return nullptr;
      throw Error(Errc::unavailable, "cannot lock " + path + ": " + std::strerror(e));
    }
    return std::make_unique<FileLease>(fd);
  }
  if (row_leases(dsn, opts)) throw Error(Errc::internal, "try_lease: row leases are taken with job_lock");
  store::StoreOptions o = opts;
  o.retries = 2;
  auto s = store::open_postgres(dsn.target, o);
  auto r = s->autocommit().query(
      std::string("SELECT CASE WHEN pg_try_advisory_lock(") + kAdvisoryKey + ") THEN 1 ELSE 0 END", {key});
  if (r[0].i64(0) != 1) return nullptr;
  return std::make_unique<PgLease>(std::move(s), key);
}

bool lease_held(const store::Dsn& dsn, const store::StoreOptions& o, store::Store& st, const std::string& key) {
  if (row_leases(dsn, o))
    return !st.query("SELECT 1 FROM job_lock WHERE name = $1 AND expires_at > " DB_NOW_MS, {key}).empty();
  return try_lease(dsn, o, key) == nullptr;
}

std::shared_ptr<const store::Store::Fence> lease_fence(int64_t run_id, std::vector<std::string> keys, int64_t ttl_ms) {
  return std::make_shared<const store::Store::Fence>([run_id, keys = std::move(keys), ttl_ms](store::Tx& tx) {
    // (an UPDATE, not a SELECT: its row locks make a takeover wait until this transaction ends)
    const int64_t n =
        ttl_ms > 0 ? tx.exec("UPDATE job_lock SET expires_at = " DB_NOW_MS " + $2 WHERE run_id = $1", {run_id, ttl_ms})
                   : tx.exec("UPDATE job_lock SET expires_at = expires_at WHERE run_id = $1", {run_id});
    if (n < int64_t(keys.size()))
      throw Error(Errc::busy, "lease lost: the lease '" + keys.front() + "' of run " + std::to_string(run_id) +
                                  " was taken over (its session ended or its row expired); this run stops before "
                                  "its next commit, and what it committed before stays");
  });
}

Heartbeat::Heartbeat(const store::Dsn& dsn, const store::StoreOptions& o, int64_t run_id, int64_t ttl_ms)
    : Heartbeat(dsn, o, "UPDATE job_lock SET expires_at = " DB_NOW_MS " + $2 WHERE run_id = $1", store::Value(run_id),
                "run " + std::to_string(run_id), ttl_ms) {}

Heartbeat::Heartbeat(const store::Dsn& dsn, const store::StoreOptions& o, std::string sql, store::Value id,
                     std::string who, int64_t ttl_ms) {
  thread_ = std::thread([this, dsn, o, sql = std::move(sql), id = std::move(id), who = std::move(who), ttl_ms] {
    std::unique_ptr<store::Store> st;
    auto next = std::chrono::steady_clock::now();
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (std::chrono::steady_clock::now() < next) continue;
      next = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(ttl_ms / 3, 100));
      try {
        if (!st) st = store::open_store(dsn, o);
        if (st->autocommit().exec(sql, {id, ttl_ms}) == 0) {
          spdlog::warn("{}: its lease rows are gone: the work stops at its next transaction", who);
          return;
        }
      } catch (const std::exception& e) {
        spdlog::warn("{}: lease heartbeat failed (retried in {} ms): {}", who, ttl_ms / 3, e.what());
        st.reset();
      }
    }
  });
}

Heartbeat::~Heartbeat() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

}  // namespace rc::jobs
