#pragma once
// Failures are a small set of typed errors. A throw site says what went wrong (an `Errc`), never
// which number the process exits with: `exit_code(Errc)` is the one table from kinds to exit codes,
// used by main's catch and by the job runner's record. Domain outcomes (sold out, limit reached, not
// qualified) are values, not errors; commands return them as `Exit` values (ok, findings, partial).
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace rc {

enum class Exit : int {
  ok = 0,            // success, including nothing to do
  findings = 1,      // findings (lint, reconcile, pending migrations), a rejected claim, an illegal transition
  partial = 3,       // partial: some rows rejected
  usage = 64,        // command line usage error
  data = 65,         // bad input data, or a conflict with what is stored
  no_input = 66,     // input file missing or unreadable
  not_found = 67,    // the activity, grant, bill or qualification named does not exist
  unavailable = 69,  // database unavailable, or it kept failing after retries
  internal = 70,     // internal error (a bug)
  cant_create = 73,  // an output file (rejects file, --csv, --html, metrics) cannot be written
  temp_fail = 75,    // lock held by another run / try again later
  no_perm = 77,      // not permitted (review rules)
  config = 78,       // configuration error, schema not migrated
  interrupted = 130, // interrupted by a signal
};

struct ExitInfo {
  Exit code;
  const char* name;
  const char* meaning;
};

// The one table used by every command, by `help exit-codes` and by the man page test.
const std::vector<ExitInfo>& exit_table();

// What went wrong. Each kind has one exit code (`exit_code`); several kinds may share one.
// `internal` stays last: the table in error.cpp is checked against it at compile time.
enum class Errc {
  usage,             // the command line is wrong: a flag's value, a missing or contradictory argument
  bad_input,         // input data is malformed or invalid: a file row, a definition, a value out of range
  conflict,          // the input contradicts what is stored: it exists already, changed since it was
                     // planned, or the record is in a state this input cannot apply to
  input_unreadable,  // an input file is missing or cannot be read
  not_found,         // the activity, grant, bill, batch, event or other record named does not exist
  refused,           // an illegal state transition (already decided, another version in review), or
                     // the operator did not confirm
  not_permitted,     // a review/approval rule forbids it, or the database does not let this user do it
  busy,              // a lock is held by another run, or a concurrent change won: try again later
  unavailable,       // the database is unreachable, or still failing after bounded retries
  output_failed,     // an output file (rejects file, --csv, --html, metrics, a temporary) cannot be written
  config,            // the configuration is invalid, or the database schema is not at this version
  interrupted,       // SIGINT/SIGTERM arrived
  internal,          // a bug
};

struct ErrcInfo {
  Errc kind;
  const char* name;  // stable, snake_case: used on the drill worker protocol
  Exit exit;
};

// The one table from error kinds to exit codes, one row per kind in enum order.
const std::vector<ErrcInfo>& errc_table();
Exit exit_code(Errc kind);
const char* errc_name(Errc kind);
std::optional<Errc> errc_from_name(const std::string& name);

class Error : public std::runtime_error {
 public:
  Error(Errc kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Errc kind() const { return kind_; }

 private:
  Errc kind_;
};

inline int exit_int(Exit e) { return static_cast<int>(e); }

}  // namespace rc
