#include "core/store/clock_sync.hpp"

#include <cstdlib>

namespace rc::store {

std::optional<ClockReading> read_server_clock(Store& st) {
  if (st.dialect() != Dialect::postgres) return std::nullopt;
  auto& s = st.autocommit();
  std::optional<ClockReading> best;
  for (int i = 0; i < 3; ++i) {
    const Millis before = ServerClock::host_ms();
    const Millis db = s.query("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")[0].i64(0);
    const Millis after = ServerClock::host_ms();
    ClockReading r{before + (after - before) / 2, db, after - before};
    if (!best || r.round_trip_ms < best->round_trip_ms) best = r;
    if (best->round_trip_ms <= 1) break;  // as good as a reading gets
  }
  return best;
}

std::string describe_skew(const ClockReading& r) {
  const Millis d = r.offset();
  return "the host's clock is " + std::to_string(std::llabs(d)) + " ms " + (d > 0 ? "behind" : "ahead of") +
         " the database's (host " + format_utc(r.host) + ", database " + format_utc(r.database) + ")";
}

}  // namespace rc::store
