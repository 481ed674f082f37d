#pragma once
// The one classification of database errors, for both backends. Exit 70 means "a bug in
// rewardctl"; a fault outside the program (the server went away, a privilege is missing, the disk
// is full, an operator stopped the backend) is not one, and says which it is:
//
//   PostgreSQL SQLSTATE           SQLite result code                    fault        exit
//   40xxx, 55P03                  BUSY, LOCKED                          retry        (retried, then 69)
//   23505                         CONSTRAINT_UNIQUE, _PRIMARYKEY        unique       (a twin won)
//   08xxx, 53xxx, 57xxx, 58xxx    CANTOPEN, IOERR, FULL, NOMEM,         unavailable  69
//                                 CORRUPT, NOTADB, PROTOCOL
//   28xxx, 42501, 25006           READONLY, PERM, AUTH                  no_perm      77
//   22xxx                         TOOBIG, RANGE                         data         65
//   57014 after SIGINT/SIGTERM    INTERRUPT                             interrupted  130
//   anything else                 anything else                         bug          70
#include <string>

#include "base/error.hpp"

namespace rc::store {

enum class Fault { retry, unique, unavailable, no_perm, data, interrupted, bug };

// PostgreSQL: by the SQLSTATE's class (its first two characters), with the few codes whose class
// is too wide. `interrupted`: this process received SIGINT/SIGTERM (a query it cancelled).
Fault classify_sqlstate(const std::string& sqlstate, bool interrupted);
// SQLite: by the (extended) result code.
Fault classify_sqlite(int extended_code, bool interrupted);

// The error kind of a fault (retry: what is left when retries are used up).
Errc fault_errc(Fault f);

// Throws the typed error for a fault: Retryable, UniqueViolation, or Error(fault_errc(f), message).
[[noreturn]] void throw_fault(Fault f, const std::string& message);

}  // namespace rc::store
