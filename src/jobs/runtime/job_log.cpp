// job_run and job_lock read into their records: the one place that knows these queries' columns.
#include "jobs/runtime/job_log.hpp"

#include <signal.h>

#include <cerrno>

#include "jobs/runtime/lease.hpp"

namespace rc::jobs {
namespace {

JobRunRecord to_run(const store::Row& r) {
  JobRunRecord x;
  x.id = r.i64(0);
  x.job = r.str(1);
  x.state = r.str(2);
  x.counts = r.opt_str(3);
  x.error = r.opt_str(4);
  x.started_at = r.i64(5);
  x.finished_at = r.opt_i64(6);
  x.host = r.opt_str(7);
  x.pid = r.opt_i64(8);
  x.exit_code = r.opt_i64(9);
  x.stopped = r.opt_str(10);
  x.holder = r.str(11);
  return x;
}

const char* kLockSelect = "SELECT name, job, host, pid, holder, acquired_at, run_id FROM job_lock ";

JobLockRecord to_lock(const store::Row& r) {
  JobLockRecord x;
  x.name = r.str(0);
  x.job = r.opt_str(1);
  x.host = r.opt_str(2);
  x.pid = r.opt_i64(3);
  x.holder = r.str(4);
  x.acquired_at = r.i64(5);
  x.run_id = r.opt_i64(6);
  return x;
}

}  // namespace

std::vector<JobRunRecord> job_history(store::Store& st, const std::string& job, int64_t limit) {
  auto r = st.query(
      "SELECT id, job, state, counts, error, started_at, finished_at, host, pid, exit_code, stopped, holder "
      "FROM job_run WHERE ($1 = '' OR job = $1) ORDER BY id DESC LIMIT $2",
      {job, limit});
  std::vector<JobRunRecord> out;
  for (auto& row : r.rows) out.push_back(to_run(row));
  return out;
}

int64_t mark_abandoned(store::Tx& tx, const std::vector<int64_t>& lease_gone, const std::string& job,
                       const std::string& finder, Millis now) {
  auto mark = [&](int64_t id, const std::string& why) {
    return tx.exec("UPDATE job_run SET state = 'abandoned', finished_at = $2, error = $3 WHERE id = $1 AND "
                   "state = 'running'",
                   {id, now, "found abandoned by " + finder + " at " + format_utc(now) + ": " + why});
  };
  int64_t n = 0;
  for (int64_t id : lease_gone) n += mark(id, "its lease was no longer held");
  auto here = tx.query("SELECT id, pid FROM job_run WHERE state = 'running' AND host = $1 AND ($2 = '' OR job = $2) "
                       "AND pid IS NOT NULL",
                       {host_name(), job});
  for (auto& r : here.rows) {
    const int64_t pid = r.i64(1);
    if (pid <= 0 || pid > INT32_MAX || pid == int64_t(::getpid())) continue;
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to signal: alive
    n += mark(r.i64(0), "its process " + std::to_string(pid) + " on this host is gone");
  }
  return n;
}

std::vector<JobLockRecord> job_locks(store::Store& st) {
  std::vector<JobLockRecord> out;
  for (auto& row : st.query(std::string(kLockSelect) + "ORDER BY name").rows) out.push_back(to_lock(row));
  return out;
}

std::optional<JobLockRecord> job_lock(store::Store& st, const std::string& name) {
  auto r = st.query(std::string(kLockSelect) + "WHERE name = $1", {name});
  if (r.empty()) return std::nullopt;
  return to_lock(r[0]);
}

}  // namespace rc::jobs
