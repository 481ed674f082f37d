#pragma once
// Failures are a small set of typed errors, each with one documented exit code. Domain outcomes
// (sold out, limit reached, not qualified) are values, not errors. The CLI converts an Error to its
// exit code once, in main.
#include <stdexcept>
#include <string>
#include <vector>

namespace rc {

enum class Exit : int {
  ok = 0,            // success, including nothing to do
  findings = 1,      // findings (lint, reconcile, pending migrations), a rejected claim, an illegal transition
  partial = 3,       // partial: some rows rejected
  usage = 64,        // command line usage error
  data = 65,         // bad input data
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

class Error : public std::runtime_error {
 public:
  Error(Exit code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Exit code() const { return code_; }

 private:
  Exit code_;
};

inline int exit_int(Exit e) { return static_cast<int>(e); }

}  // namespace rc
