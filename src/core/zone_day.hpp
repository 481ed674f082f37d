#pragma once
// The calendar days of a time zone (report's day buckets): implemented in clock.cpp with the limit
// periods' period_key, on the same tz database, so a "day" is the same thing for both.
#include <string>

#include "core/clock.hpp"

namespace rc {

// The first instant of the calendar day (in the zone) that contains t: its local midnight, or the
// moment of the change when a DST change skips midnight. Days follow the zone: 23 or 25 hours long
// on the days its clocks change. next_day_start_in_zone: the first instant of the day after.
Millis day_start_in_zone(Millis t, const std::string& zone);
Millis next_day_start_in_zone(Millis t, const std::string& zone);

}  // namespace rc
