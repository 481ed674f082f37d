// store.cpp parse_dsn, clock.cpp, error.cpp exit table.
#include <doctest/doctest.h>

#include <set>

#include "core/clock.hpp"
#include "base/error.hpp"
#include "core/store/store.hpp"

using namespace rc;
using rc::store::Dialect;
using rc::store::parse_dsn;

TEST_CASE("dsn: sqlite, postgres URIs and conninfo, unknown schemes refused") {
  CHECK(parse_dsn("sqlite:rewardctl.db", "x").dialect == Dialect::sqlite);
  CHECK(parse_dsn("sqlite:rewardctl.db", "x").target == "rewardctl.db");
  CHECK(parse_dsn("sqlite:///var/lib/r.db", "x").target == "/var/lib/r.db");
  CHECK(parse_dsn("postgresql://u@h:5432/d", "x").dialect == Dialect::postgres);
  CHECK(parse_dsn("postgres://h/d", "x").dialect == Dialect::postgres);
  CHECK(parse_dsn("service=rewards", "x").dialect == Dialect::postgres);
  CHECK(parse_dsn("host=/tmp port=5 dbname=d", "x").target == "host=/tmp port=5 dbname=d");
  try {
    parse_dsn("mysql://h/d", "--db");
    FAIL("accepted mysql");
  } catch (const Error& e) {
    CHECK(e.kind() == Errc::config);
    CHECK(std::string(e.what()).find("unknown database scheme 'mysql' in --db") != std::string::npos);
  }
  CHECK_THROWS_AS(parse_dsn("sqlite:", "x"), Error);
  CHECK_THROWS_AS(parse_dsn("rewardctl.db", "x"), Error);
}

TEST_CASE("clock: REWARDCTL_NOW fixes the time, RFC 3339 parsing and zones") {
  auto c = make_clock("2025-11-30T23:59:59+08:00");
  CHECK(format_utc(c->now_ms()) == "2025-11-30T15:59:59.000Z");
  CHECK_THROWS_AS(make_clock("yesterday"), Error);
  auto sys = make_clock(nullptr);
  CHECK(sys->now_ms() > 1700000000000);
  CHECK(parse_rfc3339("2025-01-01T00:00:00Z") == 1735689600000);
  CHECK(parse_rfc3339("2025-01-01T08:00:00.250+08:00") == 1735689600250);
  CHECK_FALSE(parse_rfc3339("2025-01-01T00:00:00"));       // no offset
  CHECK_FALSE(parse_rfc3339("2025-02-30T00:00:00Z"));      // no such day
  CHECK_FALSE(parse_rfc3339("2025-01-01T00:00:00Zjunk"));
  CHECK(format_in_zone(1735689600000, "Asia/Shanghai") == "2025-01-01T08:00:00+08:00");
  CHECK(zone_exists("America/New_York"));
  CHECK_FALSE(zone_exists("Mars/Olympus_Mons"));
}

TEST_CASE("clock: period keys follow the activity's zone") {
  // 2025-11-30T16:30:00Z is 00:30 on Dec 1 in Shanghai, still Nov 30 in UTC.
  Millis t = *parse_rfc3339("2025-11-30T16:30:00Z");
  CHECK(period_key(Period::day, t, "Asia/Shanghai") == "2025-12-01");
  CHECK(period_key(Period::day, t, "UTC") == "2025-11-30");
  CHECK(period_key(Period::month, t, "Asia/Shanghai") == "2025-12");
  CHECK(period_key(Period::week, t, "Asia/Shanghai") == "2025-W49");
  CHECK(period_key(Period::week, *parse_rfc3339("2021-01-03T12:00:00Z"), "UTC") == "2020-W53");
  CHECK(period_key(Period::total, t, "UTC") == "total");
}

TEST_CASE("exit codes: one table, distinct codes, the documented values") {
  std::set<int> seen;
  for (auto& e : exit_table()) CHECK(seen.insert(exit_int(e.code)).second);
  CHECK(seen == std::set<int>{0, 1, 3, 64, 65, 66, 67, 69, 70, 73, 75, 77, 78, 130});
}
