#pragma once
// Schema migrations: sql/NNNN_name.sql, expanded per dialect and embedded by cmake/embed.cmake;
// and, on PostgreSQL, the stored functions' repeatable sources (sql/functions/NAME.sql), recorded
// with their checksum in schema_functions and run again by migrate when this binary's text differs.
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::store {

struct AppliedMigration {
  int version;
  std::string name;
  std::string checksum;
  Millis applied_at;
};

struct SchemaStatus {
  int current = 0;                    // highest applied version, 0 for an empty database
  int latest = 0;                     // highest version this binary knows
  std::vector<AppliedMigration> applied;
  std::vector<std::string> pending;   // names of migrations not yet applied
  std::vector<std::string> modified;  // applied migrations whose file changed since
  // PostgreSQL: stored functions whose text in the database is not this binary's (never applied, or
  // changed) and that migrate would run again. A function last written by a binary that knows a
  // newer schema than this one is left alone: an older binary never puts an older function back.
  std::vector<std::string> functions_stale;
  bool newer() const { return current > latest; }
  bool up_to_date() const { return pending.empty() && functions_stale.empty() && !newer(); }
};

SchemaStatus schema_status(Store& s);

// Applies every pending migration in one transaction. Safe when several run at once: SQLite
// serializes them with BEGIN IMMEDIATE, PostgreSQL with a transaction-level advisory lock; the
// loser sees the winner's rows and applies nothing. Then, in the same transaction, runs every stale
// stored function's source (PostgreSQL). Returns the names of the migrations applied; the names of
// the functions it ran go to `functions` when given.
std::vector<std::string> migrate(Store& s, Millis now, std::vector<std::string>* functions = nullptr);

// Throws Error(config) naming the fix when the schema is behind or ahead of this binary; warns (and
// goes on: the stored functions keep their contract across versions) when a function is stale.
void require_current_schema(Store& s);

}  // namespace rc::store
