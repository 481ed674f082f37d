#include "core/store/fault.hpp"

#include <sqlite3.h>

#include "core/store/store.hpp"

namespace rc::store {

Fault classify_sqlstate(const std::string& st, bool interrupted) {
  const std::string cls = st.substr(0, 2);
  if (st == "57014" && interrupted) return Fault::interrupted;   // query_canceled: we asked for it
  if (cls == "40" || st == "55P03") return Fault::retry;        // serialization, deadlock; lock_not_available
  if (st == "23505") return Fault::unique;
  if (cls == "08" || cls == "53" || cls == "57" || cls == "58") return Fault::unavailable;
  if (cls == "28" || st == "42501" || st == "25006") return Fault::no_perm;  // authorization, privilege, read-only
  if (cls == "22") return Fault::data;
  return Fault::bug;
}

Fault classify_sqlite(int ext, bool interrupted) {
  switch (ext) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY: return Fault::unique;
    default: break;
  }
  switch (ext & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Fault::retry;
    case SQLITE_INTERRUPT: return interrupted ? Fault::interrupted : Fault::unavailable;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_NOMEM:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_PROTOCOL:
    case SQLITE_NOLFS: return Fault::unavailable;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH: return Fault::no_perm;
    case SQLITE_TOOBIG: return Fault::data;  // (SQLITE_RANGE, a parameter index out of range, is ours: a bug)
    default: return Fault::bug;
  }
}

Errc fault_errc(Fault f) {
  switch (f) {
    case Fault::retry:
    case Fault::unavailable: return Errc::unavailable;
    case Fault::unique:
    case Fault::bug: return Errc::internal;
    case Fault::no_perm: return Errc::not_permitted;
    case Fault::data: return Errc::bad_input;
    case Fault::interrupted: return Errc::interrupted;
  }
  return Errc::internal;
}

void throw_fault(Fault f, const std::string& message) {
  if (f == Fault::retry) throw Retryable(message);
  if (f == Fault::unique) throw UniqueViolation(message);
  throw Error(fault_errc(f), message);
}

}  // namespace rc::store
