#include "jobs/runtime/lease.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
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

class PgLease : public Lease {
 public:
  PgLease(std::unique_ptr<store::Store> s, std::string key) : s_(std::move(s)), key_(std::move(key)) {}
  ~PgLease() override {
    try {
      s_->autocommit().query("SELECT pg_advisory_unlock(7261748, hashtext(current_schema() || '/' || $1::text))", {key_});
    } catch (...) {
      // the session ends with the store below, which frees the lock anyway
    }
  }

 private:
  std::unique_ptr<store::Store> s_;
  std::string key_;
};

}  // namespace

std::string lease_file(const std::string& db_path, const std::string& key) {
  std::string k;
  for (char c : key) k += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return db_path + ".job-" + k + ".lock";
}

std::unique_ptr<Lease> try_lease(const store::Dsn& dsn, const std::string& key) {
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
  store::StoreOptions o;
  o.retries = 2;
  auto s = store::open_postgres(dsn.target, o);
  auto r = s->autocommit().query("SELECT CASE WHEN pg_try_advisory_lock(7261748, hashtext(current_schema() || '/' || $1::text)) THEN 1 ELSE 0 END",
                                 {key});
  if (r[0].i64(0) != 1) return nullptr;
  return std::make_unique<PgLease>(std::move(s), key);
}

bool lease_held(const store::Dsn& dsn, const std::string& key) { return try_lease(dsn, key) == nullptr; }

}  // namespace rc::jobs
