#include "jobs/runtime/job_table.hpp"

#include "base/error.hpp"

namespace rc::jobs {

const char* lock_kind_name(LockKind k) { return k == LockKind::exclusive ? "exclusive" : "per_item"; }

const std::vector<JobDecl>& job_table() {
  // expire and reconcile conflict: a reconcile taken while expire ends activities and returns
  // what grants held would compare counters caught between two chunks.
  static const std::vector<JobDecl> t = {
      {"expire", "end activities past their window, expire qualifications and held grants past validity",
       LockKind::exclusive, {"reconcile"}, true},
      {"resend", "redeliver due resend bills and stranded init grants with the same bill number", LockKind::per_item, {}},
      {"fuse-scan", "evaluate fuse rules and block what trips", LockKind::exclusive, {}},
      {"reconcile", "prove stock, budget, ledger and logs add up", LockKind::exclusive, {"expire"}},
      {"list-issue", "issue a prize to every user of an approved list batch", LockKind::per_item, {}},
      {"import-qualifications", "load a whitelist CSV into an activity's qualifications", LockKind::per_item, {}},
      {"qualification-revoke", "revoke the unused qualifications of the users a CSV lists", LockKind::per_item, {}},
  };
  return t;
}

const JobDecl& job_decl(const std::string& name) {
  std::string known;
  for (auto& d : job_table()) {
    if (d.name == name) return d;
    known += (known.empty() ? "" : ", ") + d.name;
  }
  throw Error(Errc::usage, "unknown job '" + name + "' (jobs: " + known + ")");
}

}  // namespace rc::jobs
