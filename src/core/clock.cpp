#include "core/clock.hpp"
#include "core/zone_day.hpp"

#include <date/date.h>
#include <date/tz.h>

#include <chrono>
#include <cstdio>

#include "base/error.hpp"

namespace rc {

using namespace std::chrono;

Millis SystemClock::now_ms() const {
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Millis ServerClock::host_ms() {
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::unique_ptr<Clock> make_clock(const char* env) {
  if (env && *env) {
    auto t = parse_rfc3339(env);
    if (!t) throw Error(Errc::config, std::string("REWARDCTL_NOW is not RFC 3339 with an offset: '") + env + "'");
    return std::make_unique<FixedClock>(*t);
  }
  return std::make_unique<ServerClock>();
}

static bool digits(const std::string& s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  out = v;
  return true;
}

std::optional<Millis> parse_rfc3339(const std::string& s) {
  int Y, M, D, h, m, sec;
  if (!digits(s, 0, 4, Y) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, M) || s[7] != '-' ||
      !digits(s, 8, 2, D) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !digits(s, 11, 2, h) ||
      s[13] != ':' || !digits(s, 14, 2, m) || s[16] != ':' || !digits(s, 17, 2, sec))
    return std::nullopt;
  size_t p = 19;
  int ms = 0;
  if (p < s.size() && s[p] == '.') {
    ++p;
    size_t start = p;
    int scale = 100;
    while (p < s.size() && s[p] >= '0' && s[p] <= '9') {
      if (scale > 0) ms += (s[p] - '0') * scale;
      scale /= 10;
      ++p;
    }
    if (p == start) return std::nullopt;
  }
  if (p >= s.size()) return std::nullopt;
  int offset_min = 0;
  if (s[p] == 'Z' || s[p] == 'z') {
    ++p;
  } else if (s[p] == '+' || s[p] == '-') {
    int oh, om;
    if (!digits(s, p + 1, 2, oh) || p + 3 >= s.size() || s[p + 3] != ':' || !digits(s, p + 4, 2, om))
      return std::nullopt;
    if (oh > 23 || om > 59) return std::nullopt;
    offset_min = (oh * 60 + om) * (s[p] == '-' ? -1 : 1);
    p += 6;
  } else {
    return std::nullopt;
  }
  if (p != s.size()) return std::nullopt;
  if (M < 1 || M > 12 || h > 23 || m > 59 || sec > 60) return std::nullopt;
  auto ymd = date::year{Y} / date::month{unsigned(M)} / date::day{unsigned(D)};
  if (!ymd.ok()) return std::nullopt;
  auto tp = date::sys_days{ymd} + hours{h} + minutes{m} + seconds{sec == 60 ? 59 : sec} + milliseconds{ms};
  return duration_cast<milliseconds>(tp.time_since_epoch()).count() - Millis(offset_min) * 60000;
}

std::string format_utc(Millis t) {
  date::sys_time<milliseconds> tp{milliseconds{t}};
  return date::format("%FT%TZ", tp);  // always milliseconds: timestamps sort as strings
}

std::string format_in_zone(Millis t, const std::string& zone) {
  date::sys_time<milliseconds> tp{milliseconds{t}};
  auto z = date::make_zoned(zone, date::floor<seconds>(tp));
  std::string s = date::format("%FT%T%Ez", z);
  return s;
}

bool zone_exists(const std::string& zone) {
  if (zone.empty()) return false;
  try {
    (void)date::locate_zone(zone);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::optional<Period> parse_period(const std::string& s) {
  if (s == "total") return Period::total;
  if (s == "day") return Period::day;
  if (s == "week") return Period::week;
  if (s == "month") return Period::month;
  return std::nullopt;
}

const char* period_name(Period p) {
  switch (p) {
    case Period::total: return "total";
    case Period::day: return "day";
    case Period::week: return "week";
    case Period::month: return "month";
  }
  return "total";
}

namespace {
// The local calendar day that contains t in the zone (limit periods and report day buckets).
date::local_days local_day(Millis t, const std::string& zone) {
  date::sys_time<milliseconds> tp{milliseconds{t}};
  return date::floor<date::days>(date::make_zoned(zone, tp).get_local_time());
}
// The first instant of local day ld: a midnight the clocks skip maps to the change itself.
Millis day_start(date::local_days ld, const std::string& zone) {
  auto z = date::make_zoned(zone, date::local_time<milliseconds>{ld}, date::choose::earliest);
  return z.get_sys_time().time_since_epoch().count();
}
}  // namespace

Millis day_start_in_zone(Millis t, const std::string& zone) { return day_start(local_day(t, zone), zone); }

Millis next_day_start_in_zone(Millis t, const std::string& zone) {
  return day_start(local_day(t, zone) + date::days{1}, zone);
}

std::string period_key(Period p, Millis t, const std::string& zone) {
  if (p == Period::total) return "total";
  auto ld = local_day(t, zone);
  date::year_month_day ymd{ld};
  char buf[32];
  if (p == Period::day) {
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", int(ymd.year()), unsigned(ymd.month()), unsigned(ymd.day()));
  } else if (p == Period::month) {
    std::snprintf(buf, sizeof buf, "%04d-%02u", int(ymd.year()), unsigned(ymd.month()));
  } else {
    // ISO 8601 week: the week belongs to the year of its Thursday.
    date::weekday wd{ld};
    int iso_wd = wd.iso_encoding();  // Mon=1..Sun=7
    auto thursday = ld + date::days{4 - iso_wd};
    date::year_month_day ty{thursday};
    auto jan1 = date::local_days{ty.year() / date::January / 1};
    int week = int((thursday - jan1).count() / 7) + 1;
    std::snprintf(buf, sizeof buf, "%04d-W%02d", int(ty.year()), week);
  }
  return buf;
}

}  // namespace rc
