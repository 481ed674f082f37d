#pragma once
// Internals of reconcile: the table of checks (name, summary, query) and named-parameter binding.
#include <map>
#include <string>
#include <utility>

#include "jobs/reconcile.hpp"

namespace rc::jobs::reconcile {

struct Check {
  CheckInfo info;
  std::string sql;  // rows of (entity, key, expected, actual, detail, at ms or NULL); named parameters
  // SQLite's text when the cheapest form differs (same rows, same order of columns); empty: sql
  std::string sqlite_sql = {};
};
const std::vector<Check>& check_table();

// Rewrites ":name" parameters (outside string literals) to $1, $2 ... in order of first use and
// returns the SQL with the values to bind. Error(internal) for a name missing from `values`.
std::pair<std::string, store::Params> bind_named(const std::string& sql, const std::map<std::string, store::Value>& values);

}  // namespace rc::jobs::reconcile
