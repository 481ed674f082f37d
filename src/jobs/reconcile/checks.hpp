#pragma once
// Internals of reconcile: the table of checks (name, summary, query) and named-parameter binding.
#include <map>
#include <string>
#include <utility>

#include "jobs/reconcile/reconcile.hpp"

namespace rc::jobs::reconcile {

struct Check {
  CheckInfo info;
  std::string sql;  // rows of (entity, key, expected, actual, detail, at ms or NULL); named parameters
  // SQLite's text when the cheapest form differs (same rows, same order of columns); empty: sql
  std::string sqlite_sql = {};
  // Further queries of the check (both dialects), whose rows follow sql's in this order: a run may
  // perform them on other connections beside it (the same snapshot), so that one long check is not
  // the whole run's wait. `more` is asked before a check's first query only.
  std::vector<std::string> more_sql = {};
  // How long sql takes against the other checks' queries on a big database (0: a moment): when a
  // run's checks are side by side, the heaviest queries are taken first (then the table's order),
  // so that no connection is left with a long query after the others have finished.
  int weight = 0;
  // PostgreSQL planner settings for sql alone (name, value: set for the transaction before it, and
  // the transaction's earlier value put back after): where the planner's estimate picks a plan measured to be slower
  // (status_log: the window's output is already in record order, and a merge join with the records'
  // primary key beats hashing a million records, which the planner, guessing 2.5 rows out of 3 pass
  // the window's filter where 1 does, never chooses).
  std::vector<std::pair<std::string, std::string>> pg_settings = {};
  // PostgreSQL, a run over all activities (no --activity) and without Options::exact: queries that
  // sum hashes of both sides of the check's invariants (reconcile_checks.cpp), each returning rows
  // of (part, expected, actual) as text. When every row of every one has expected = actual, the
  // books agree with this check (but for a chance of one in 2^64) and its own queries are not
  // performed; otherwise they are. Each is a query of its own, so a run may perform them on other
  // connections beside each other; `weight` as Check::weight.
  struct Fingerprint {
    std::string sql;
    int weight = 0;
  };
  std::vector<Fingerprint> pg_fingerprints = {};
};
const std::vector<Check>& check_table();

// Rewrites ":name" parameters (outside string literals) to $1, $2 ... in order of first use and
// returns the SQL with the values to bind. Error(internal) for a name missing from `values`.
std::pair<std::string, store::Params> bind_named(const std::string& sql, const std::map<std::string, store::Value>& values);

}  // namespace rc::jobs::reconcile
