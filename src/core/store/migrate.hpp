#pragma once
// Schema migrations: sql/NNNN_name.sql, expanded per dialect and embedded by cmake/embed.cmake.
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
  bool newer() const { return current > latest; }
  bool up_to_date() const { return pending.empty() && !newer(); }
};

SchemaStatus schema_status(Store& s);

// Applies every pending migration in one transaction. Safe when several run at once: SQLite
// serializes them with BEGIN IMMEDIATE, PostgreSQL with a transaction-level advisory lock; the
// loser sees the winner's rows and applies nothing. Returns the names applied.
std::vector<std::string> migrate(Store& s, Millis now);

// Throws Error(config) naming the fix when the schema is behind or ahead of this binary.
void require_current_schema(Store& s);

}  // namespace rc::store
