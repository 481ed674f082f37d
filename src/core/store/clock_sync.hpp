#pragma once
// The database's clock, read from the host (docs/design.md §9.1). With many
// hosts on one PostgreSQL database, the database server is the one clock they share: a window, a
// limit period, a fuse window, an expiry and every stored time are decided by it, never by a host
// whose clock may be minutes or days off. Reading now() in every statement would not do for the
// times the engine computes before its statements (a day limit's period key); so the host measures
// its clock's offset from the server's once when it connects (the reading with the shortest round
// trip of a few; the error is at most half that round trip), and a ServerClock adds it to every
// reading. SQLite is one host's file: its clock is the host's.
#include <cstdint>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::store {

struct ClockReading {
  Millis host = 0;      // the host's clock at the middle of the round trip
  Millis database = 0;  // the server's clock_timestamp() then
  Millis offset() const { return database - host; }  // add to the host's clock to get the server's
  Millis round_trip_ms = 0;
};

// The server's clock against the host's: none on SQLite (one host, one clock). Throws like a query.
std::optional<ClockReading> read_server_clock(Store& st);

// "the host's clock is 172800123 ms behind the database's (host 2026-..., database 2026-...)".
std::string describe_skew(const ClockReading& r);

}  // namespace rc::store
