#pragma once
// Whitelists (资格名单): import-qualifications, qualification revoke, show and count.
//
// An import is idempotent by UNIQUE (activity_id, user_id): importing the same file again adds
// nothing and reports every user as existing. By default the whole file is one transaction —
// it commits entirely or not at all. With a batch size it commits every N rows under an import id
// (import_run); rerunning the same file (same SHA-256, activity and source) after a crash or a kill
// continues after the last committed row, with no duplicate and no loss.
#include <cstdint>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "base/error.hpp"
#include "core/states.hpp"
#include "core/store/store.hpp"
#include "jobs/import/load.hpp"
#include "jobs/import/rows.hpp"
#include "jobs/input/reject_limit.hpp"
#include "jobs/runtime/progress.hpp"

namespace rc::jobs {

struct ImportOptions {
  std::string activity;      // activity code
  std::string file;          // path, or "-" for standard input
  std::string source;        // recorded on each row; default: the file name ("stdin" for -)
  std::string rejects_path;  // default: FILE.rejects.csv (stdin.rejects.csv for -)
  import::RejectLimit max_rejects;  // default 0: any rejected row fails the import
  int64_t batch_size = 0;    // rows per transaction; 0 = the whole file in one
  bool dry_run = false;      // everything is done and rolled back; the rejects file only with rejects_path
  // When new qualifications expire (the expire job moves them unused -> expired), unless the row's
  // own expires_at cell says otherwise; none: they never expire. REQUIRES: after now.
  std::optional<Millis> expires_at;
  std::string operator_name;
  ProgressMode progress = ProgressMode::none;
};

struct ImportResult {
  std::string activity, file, import_id, sha256;
  std::string rejects_path;  // empty when no rejects file was written
  import::Counts counts;     // totals, including what an earlier run committed when resumed
  int64_t resumed_from = 0;  // data rows committed by the earlier run this one continued
  import::Counts resumed;    // what that earlier run committed (counts less this: this run's work)
  // SIGINT/SIGTERM stopped the import after its last committed batch: counts are what is committed.
  bool interrupted = false;
  double seconds = 0;
  bool dry_run = false;
  // More rows were rejected than --max-rejects allows: the transaction was rolled back (with a batch
  // size, the batches committed before it stay, and a rerun continues from there).
  bool over_limit = false;
  std::string limit;  // --max-rejects as given
  // ok (nothing rejected), partial (rejected within the limit) or data (over it).
  Exit exit_code() const;
};

// REQUIRES: the schema is current. Throws Error(no_input) for a missing or unreadable file,
// Error(usage) for an unknown activity, Error(data) naming FILE:LINE for a structurally broken file
// (nothing is written then, unless earlier batches were committed), Error(interrupted) on SIGINT/SIGTERM.
ImportResult import_qualifications(store::Store& s, const ImportOptions& o, const Clock& clock);

struct RevokeOptions {
  std::string activity, file, rejects_path, reason, operator_name;
  import::RejectLimit max_rejects;
  int64_t batch_size = 0;
  bool dry_run = false;
  ProgressMode progress = ProgressMode::none;
};

struct RevokeResult {
  std::string activity, file, rejects_path, limit;
  int64_t read = 0, revoked = 0, not_found = 0, not_unused = 0, rejected = 0;
  double seconds = 0;
  bool dry_run = false, over_limit = false;
  bool interrupted = false;  // SIGINT/SIGTERM: the counts are what the committed batches did
  Exit exit_code() const;
};

// Revokes the unused qualifications of the users the file lists (same file rules as the import):
// each one moves unused -> revoked with a status-log row in the same transaction; users with no
// qualification or one already used, revoked or expired are counted and left alone, so a rerun
// is harmless.
RevokeResult revoke_qualifications(store::Store& s, const RevokeOptions& o, const Clock& clock);

struct Qualification {
  std::string user_id;
  QualificationStatus status = QualificationStatus::unused;
  std::optional<std::string> source, import_id, ext;
  std::optional<int64_t> import_line, expires_at;
  Millis created_at = 0, updated_at = 0;
};
// nullopt when the user has no qualification for the activity. Throws Error(not_found) for an unknown activity.
std::optional<Qualification> find_qualification(store::Store& s, const std::string& activity, const std::string& user);
// Qualifications of the activity, of one status when given. Throws Error(not_found) for an unknown
// activity or status.
int64_t count_qualifications(store::Store& s, const std::string& activity, const std::optional<std::string>& status);

}  // namespace rc::jobs
