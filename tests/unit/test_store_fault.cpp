// store/fault.cpp: the one classification of database errors, for both backends.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include "core/store/fault.hpp"
#include "core/store/store.hpp"

using namespace rc;
using namespace rc::store;

TEST_CASE("fault: PostgreSQL errors by SQLSTATE class") {
  struct C {
    const char* state;
    Fault fault;
    Exit exit;
  };
  for (auto c : std::vector<C>{
           {"40001", Fault::retry, Exit::unavailable},        // serialization failure
           {"40P01", Fault::retry, Exit::unavailable},        // deadlock
           {"55P03", Fault::retry, Exit::unavailable},        // lock not available (lock_timeout)
           {"23505", Fault::unique, Exit::internal},          // handled by callers as a twin
           {"08006", Fault::unavailable, Exit::unavailable},  // connection failure
           {"08P01", Fault::unavailable, Exit::unavailable},  // (libpqxx 6.4 throws class 08 as broken_connection)
           {"53100", Fault::unavailable, Exit::unavailable},  // disk full
           {"53300", Fault::unavailable, Exit::unavailable},  // too many connections
           {"57P01", Fault::unavailable, Exit::unavailable},  // admin shutdown: backend terminated
           {"57014", Fault::unavailable, Exit::unavailable},  // cancelled by someone else
           {"58030", Fault::unavailable, Exit::unavailable},  // I/O error
           {"28P01", Fault::no_perm, Exit::no_perm},          // password authentication failed
           {"42501", Fault::no_perm, Exit::no_perm},          // permission denied for table
           {"25006", Fault::no_perm, Exit::no_perm},          // read-only transaction
           {"22021", Fault::data, Exit::data},                // invalid byte sequence for UTF8
           {"22003", Fault::data, Exit::data},                // numeric value out of range
           {"42601", Fault::bug, Exit::internal},             // syntax error: ours
           {"23514", Fault::bug, Exit::internal},             // check violation: lint should have caught it
           {"", Fault::bug, Exit::internal}}) {
    CAPTURE(c.state);
    CHECK(classify_sqlstate(c.state, false) == c.fault);
    CHECK(exit_code(fault_errc(c.fault)) == c.exit);
  }
  CHECK(classify_sqlstate("57014", true) == Fault::interrupted);  // the cancel we sent on SIGTERM
  CHECK(fault_errc(Fault::interrupted) == Errc::interrupted);
  CHECK(classify_sqlstate("57P01", true) == Fault::unavailable);
}

TEST_CASE("fault: SQLite errors by result code, in the same classes") {
  CHECK(classify_sqlite(SQLITE_BUSY, false) == Fault::retry);
  CHECK(classify_sqlite(SQLITE_BUSY_SNAPSHOT, false) == Fault::retry);
  CHECK(classify_sqlite(SQLITE_LOCKED, false) == Fault::retry);
  CHECK(classify_sqlite(SQLITE_CONSTRAINT_UNIQUE, false) == Fault::unique);
  CHECK(classify_sqlite(SQLITE_CONSTRAINT_PRIMARYKEY, false) == Fault::unique);
  CHECK(classify_sqlite(SQLITE_CONSTRAINT_CHECK, false) == Fault::bug);
  CHECK(classify_sqlite(SQLITE_READONLY, false) == Fault::no_perm);
  CHECK(classify_sqlite(SQLITE_READONLY_DBMOVED, false) == Fault::no_perm);
  CHECK(classify_sqlite(SQLITE_PERM, false) == Fault::no_perm);
  CHECK(classify_sqlite(SQLITE_FULL, false) == Fault::unavailable);
  CHECK(classify_sqlite(SQLITE_IOERR_WRITE, false) == Fault::unavailable);
  CHECK(classify_sqlite(SQLITE_CANTOPEN, false) == Fault::unavailable);
  CHECK(classify_sqlite(SQLITE_CORRUPT, false) == Fault::unavailable);
  CHECK(classify_sqlite(SQLITE_NOTADB, false) == Fault::unavailable);
  CHECK(classify_sqlite(SQLITE_TOOBIG, false) == Fault::data);
  CHECK(classify_sqlite(SQLITE_RANGE, false) == Fault::bug);  // a parameter index out of range: ours
  CHECK(classify_sqlite(SQLITE_INTERRUPT, true) == Fault::interrupted);
  CHECK(classify_sqlite(SQLITE_ERROR, false) == Fault::bug);
}

TEST_CASE("fault: throw_fault raises the typed error of each class") {
  CHECK_THROWS_AS(throw_fault(Fault::retry, "x"), Retryable);
  CHECK_THROWS_AS(throw_fault(Fault::unique, "x"), UniqueViolation);
  try {
    throw_fault(Fault::no_perm, "PostgreSQL error 42501: permission denied for table grants");
  } catch (const Error& e) {
    CHECK(e.kind() == Errc::not_permitted);
    CHECK(std::string(e.what()).find("42501") != std::string::npos);
  }
}

TEST_CASE("store: placeholder_count reads $N as PostgreSQL does, outside literals, names and comments") {
  struct C {
    const char* sql;
    size_t n;
  };
  for (auto c : std::vector<C>{{"SELECT 1", 0},
                               {"SELECT $1, $2", 2},
                               {"SELECT $2 WHERE x = $1 OR y = $2", 2},
                               {"SELECT $12", 12},
                               {"SELECT '$3', $1", 1},
                               {"SELECT 'it''s $4', $1", 1},
                               {"SELECT E'it\\'s $5', $1", 1},
                               {"SELECT e'a\\\\', $1", 1},
                               {"SELECT E'a''b\\' $5', $1", 1},    // a doubled quote keeps E's escapes
                               {"SELECT E'a'\n' x\\' $6', $1", 1},  // and so does a continued literal
                               {"SELECT 'a'\n'b', $2", 2},
                               {"SELECT E'a'\r' x\\' $6', $1", 1},         // a bare \r is a newline too
                               {"SELECT E'a' -- c\n' x\\' $6', $1", 1},    // a comment may stand in the gap
                               {"SELECT E'a'\n-- c\n' x\\' $6', $1", 1},
                               {"SELECT 'a' -- c\n' $7 ', $1", 1},
                               {"SELECT 'a\\', $1", 1},  // a backslash ends nothing in a plain literal
                               {"SELECT \"col$2\", $1", 1},
                               {"SELECT a$2 FROM t WHERE x = $1", 1},
                               {"SELECT 1 AS a$$b$, $1::int", 1},  // '$' inside a name, not a quote
                               {"SELECT 1 AS ab$$$1, $1::int", 1},
                               {"SELECT 1 AS a$$1", 0},
                               {"-- $5\nSELECT $1", 1},
                               {"SELECT /* don't $6 */ $1", 1},
                               {"SELECT /* a /* nested $7 */ still */ $1", 1},
                               {"SELECT /*/**/*/ $1", 1},  // the / of an inner */ opens nothing
                               {"SELECT /* a /* b */*/ $2, $1", 2},
                               {"SELECT -- c\rx, $1", 1},  // a bare \r ends a comment too
                               {"SELECT $$ it's $8 $$, $1", 1},
                               {"SELECT $tag$ $9 'x $tag$, $1", 1},
                               {"SELECT x::text, CAST($1 AS BIGINT)", 1},
                               {"SELECT '{\"a\":1}'::jsonb #> '{a}', $2, $1", 2}}) {
    CAPTURE(c.sql);
    CHECK(placeholder_count(c.sql) == c.n);
  }
  CHECK_NOTHROW(check_parameter_count("SELECT $1", 1, 1));
  CHECK_THROWS_AS(check_parameter_count("SELECT $1", 1, 2), rc::Error);
}
