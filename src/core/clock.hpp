#pragma once
// The one clock of the core. Storage keeps UTC epoch milliseconds; activities carry an IANA zone
// for their windows and limit periods.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace rc {

using Millis = int64_t;  // milliseconds since the Unix epoch, UTC

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Millis now_ms() const = 0;
};

class SystemClock : public Clock {
 public:
  Millis now_ms() const override;
};

// The clock of decisions with many hosts (docs/design.md §9.1): the host's
// clock corrected by its measured offset from the database server's (store/clock_sync.hpp). Until an
// offset is set it is the host's clock, which is right where the database is the host's own (SQLite).
// Thread-safe: the offset may be measured again while other threads read the time.
class ServerClock : public Clock {
 public:
  Millis now_ms() const override { return host_ms() + offset_.load(std::memory_order_relaxed); }
  static Millis host_ms();  // the host's own clock, for display and for measuring the offset
  void set_offset(Millis offset) { offset_.store(offset, std::memory_order_relaxed); }
  Millis offset() const { return offset_.load(std::memory_order_relaxed); }

 private:
  std::atomic<Millis> offset_{0};
};

class FixedClock : public Clock {
 public:
  explicit FixedClock(Millis t) : t_(t) {}
  Millis now_ms() const override { return t_; }
  void set(Millis t) { t_ = t; }

 private:
  Millis t_;
};

// The process clock: a ServerClock (offset 0 until a database is opened), unless REWARDCTL_NOW
// (RFC 3339, test-only) fixes the time, which then also wins over the database's clock.
// Throws Error(config) when REWARDCTL_NOW is set but not RFC 3339.
std::unique_ptr<Clock> make_clock(const char* rewardctl_now_env);

// RFC 3339 with an explicit offset or Z ("2025-11-30T23:59:59+08:00") -> epoch ms.
// Returns nullopt when malformed (no offset, out-of-range fields, trailing garbage).
std::optional<Millis> parse_rfc3339(const std::string& s);
// epoch ms -> "2025-11-30T15:59:59.000Z": always millisecond precision, so timestamps sort as strings.
std::string format_utc(Millis t);
// epoch ms -> local time in the IANA zone with its offset, "2025-11-30T23:59:59+08:00".
std::string format_in_zone(Millis t, const std::string& zone);
// true when the IANA zone exists in the system tz database.
bool zone_exists(const std::string& zone);

enum class Period { total, day, week, month };
std::optional<Period> parse_period(const std::string& s);
const char* period_name(Period p);
// The key of the period that contains t in the zone: "total", "2025-11-30", "2025-W48", "2025-11".
std::string period_key(Period p, Millis t, const std::string& zone);

}  // namespace rc
