#include "base/error.hpp"

#include <iterator>

namespace rc {

const std::vector<ExitInfo>& exit_table() {
  static const std::vector<ExitInfo> t = {
      {Exit::ok, "ok", "success, including nothing to do"},
      {Exit::findings, "findings", "findings or generic failure: lint errors, reconcile diffs, pending migrations, "
                                   "a rejected claim, an illegal state transition"},
      {Exit::partial, "partial", "partial success: some rows were rejected (under --max-rejects)"},
      {Exit::usage, "usage", "command line usage error: unknown command or flag, missing argument, an irreversible "
                             "action without --yes and no terminal"},
      {Exit::data, "data", "bad input data (malformed file, invalid definition) or a conflict with what is stored (a definition changed since planning, a fuse event already decided); nothing was written"},
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
       "(a privilege, a read-only file) or connect (its credentials)"},
      {Exit::config, "config", "configuration error, the database named does not exist, or the database schema is not at this version "
       "(run db migrate)"},
      {Exit::interrupted, "interrupted", "interrupted by a signal (SIGINT/SIGTERM)"},
  };
  return t;
}

namespace {

// The one place an error kind becomes an exit code. Many-to-one on purpose: bad_input and conflict
// both exit 65 (the input cannot be applied; nothing was written). Results (ok, findings, partial)
// are returned by commands, never thrown, so no kind maps to 0 or 3.
constexpr ErrcInfo kErrc[] = {
    {Errc::usage, "usage", Exit::usage},
    {Errc::bad_input, "bad_input", Exit::data},
    {Errc::conflict, "conflict", Exit::data},
    {Errc::input_unreadable, "input_unreadable", Exit::no_input},
    {Errc::not_found, "not_found", Exit::not_found},
    {Errc::refused, "refused", Exit::findings},
    {Errc::not_permitted, "not_permitted", Exit::no_perm},
    {Errc::busy, "busy", Exit::temp_fail},
    {Errc::unavailable, "unavailable", Exit::unavailable},
    {Errc::output_failed, "output_failed", Exit::cant_create},
    {Errc::config, "config", Exit::config},
    {Errc::interrupted, "interrupted", Exit::interrupted},
    {Errc::internal, "internal", Exit::internal},
};

constexpr bool one_row_per_kind_in_order() {
  for (size_t i = 0; i < std::size(kErrc); ++i)
    if (static_cast<size_t>(kErrc[i].kind) != i) return false;
  return std::size(kErrc) == static_cast<size_t>(Errc::internal) + 1;
}
static_assert(one_row_per_kind_in_order(), "kErrc: one row per Errc, in the enum's order");

}  // namespace

const std::vector<ErrcInfo>& errc_table() {
  static const std::vector<ErrcInfo> t(std::begin(kErrc), std::end(kErrc));
  return t;
}

Exit exit_code(Errc kind) { return kErrc[static_cast<size_t>(kind)].exit; }

const char* errc_name(Errc kind) { return kErrc[static_cast<size_t>(kind)].name; }

std::optional<Errc> errc_from_name(const std::string& name) {
  for (auto& r : kErrc)
    if (name == r.name) return r.kind;
  return std::nullopt;
}

}  // namespace rc
