#pragma once
// An activity's window, as every check reads it (claims, publish/resume, the expire job). Both ends
// are inclusive to the second: `end = 2027-06-30T23:59:59+08:00`, the style of every template and
// example, means "until the end of that second", so a claim at 23:59:59.500 is in the window and
// one at 00:00:00.000 the next day is not. Writing the end as the next midnight, 00:00:00, keeps
// that midnight second in the window too.
#include "core/clock.hpp"

namespace rc::activity {

// The first millisecond after the window: the start of the second after `end_at`'s second.
inline Millis window_close(Millis end_at) {
  Millis second = end_at >= 0 ? end_at / 1000 : -((-end_at + 999) / 1000);
  return (second + 1) * 1000;
}

enum class WindowPos { before, inside, after };

inline WindowPos window_position(Millis now, Millis start_at, Millis end_at) {
  if (now < start_at) return WindowPos::before;
  if (now >= window_close(end_at)) return WindowPos::after;
  return WindowPos::inside;
}

}  // namespace rc::activity
