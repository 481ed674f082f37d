#pragma once
// Scalar SQL functions the SQLite store gives every connection, for the queries that need the
// engine's own rules where SQLite has no equivalent (PostgreSQL's forms: jobs/reconcile/checks.cpp):
//   rc_period_key(kind, ms, zone)  the key of the limit period (total, day, week, month) that holds
//                                  the instant ms (epoch milliseconds) in the IANA zone, exactly as
//                                  the engine's period_key (core/clock.hpp); NULL for an unknown
//                                  kind or zone, or a NULL argument.
//   rc_identifier_clean(text)      1 when the text obeys the identifier text rules (valid UTF-8, no
//                                  control or invisible character, NFC: core/identifier.hpp,
//                                  docs/design.md §4.1), else 0; NULL for NULL.
// Both deterministic. Error(internal) when SQLite refuses to register one.
struct sqlite3;

namespace rc::store {

void register_sql_functions(sqlite3* db);

}  // namespace rc::store
