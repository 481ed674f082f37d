#pragma once
// Every batch job declared as data, as ninja's tool table and pgBackRest's command table do: its
// name, the lock it needs and the jobs it must not overlap with. The runner (jobs/runtime/runner.hpp) takes
// the locks; `jobs locks`, `jobs history`, the man page and examples/cron follow this table.
// import-qualifications and qualification revoke are jobs too (job_run, pause switch, SIGTERM, metrics):
// they take no lease, since UNIQUE (activity, user) and the conditional revoke make two runs safe.
#include <string>
#include <vector>

namespace rc::jobs {

enum class LockKind {
  exclusive,  // one run at a time across all hosts: a lease (expire, fuse-scan, reconcile)
  per_item,   // no lease: work is claimed row by row (FOR UPDATE SKIP LOCKED on PostgreSQL), so
              // several hosts may run it at once (resend, list-issue workers)
};
const char* lock_kind_name(LockKind k);

struct JobDecl {
  std::string name;
  std::string summary;
  LockKind lock = LockKind::exclusive;
  std::vector<std::string> conflicts;  // jobs whose lease this one also takes for its whole run
  // ends or expires things by the clock, irreversibly: refused (exit 78) while the host's clock
  // and the database's disagree beyond db.max_clock_skew_ms (core/store/clock_sync.hpp)
  bool clock_sensitive = false;
};

// The table. Names are stable: they key job_run, job_lock, the metrics and the cron examples.
const std::vector<JobDecl>& job_table();
// Throws Error(usage) listing the known names for an unknown one.
const JobDecl& job_decl(const std::string& name);

}  // namespace rc::jobs
