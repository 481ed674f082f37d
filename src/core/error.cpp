#include "core/error.hpp"

namespace rc {

const std::vector<ExitInfo>& exit_table() {
  static const std::vector<ExitInfo> t = {
      {Exit::ok, "ok", "success, including nothing to do"},
      {Exit::findings, "findings", "findings or generic failure: lint errors, reconcile diffs, pending migrations, "
                                   "a rejected claim, an illegal state transition"},
      {Exit::partial, "partial", "partial success: some rows were rejected (under --max-rejects)"},
      {Exit::usage, "usage", "command line usage error: unknown command or flag, missing argument, an irreversible "
                             "action without --yes and no terminal"},
      {Exit::data, "data", "bad input data: malformed file, invalid definition; nothing was written"},
      {Exit::no_input, "no_input", "input file missing or unreadable"},
      {Exit::not_found, "not_found", "the activity, record, bill or qualification named does not exist"},
      {Exit::unavailable, "unavailable", "database unavailable (connection lost, server stopped, disk full), "
                                         "or still failing after bounded retries"},
      {Exit::internal, "internal", "internal error (a bug: please report it)"},
      {Exit::cant_create, "cant_create",
       "an output file cannot be written (the rejects file, --csv, --html, --metrics-textfile); what the "
       "command did in the database is kept"},
      {Exit::temp_fail, "temp_fail", "lock held by another run, or a concurrent change: try again later"},
      {Exit::no_perm, "no_perm",
       "not permitted: a review or approval rule forbids it, or the database does not let this user write "
       "(a privilege, a read-only file)"},
      {Exit::config, "config", "configuration error, or the database schema is not at this version (run db migrate)"},
      {Exit::interrupted, "interrupted", "interrupted by a signal (SIGINT/SIGTERM)"},
  };
  return t;
}

}  // namespace rc
