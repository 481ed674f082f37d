// core/budget_ladder.cpp: thresholds in cents and the step of a consumed amount. No database.
#include <doctest/doctest.h>

#include <cstdint>

#include "core/budget_ladder.hpp"

using namespace rc;

TEST_CASE("ladder: a threshold is the smallest consumed amount at or above ratio x authorised") {
  CHECK(threshold_cents(1000, 800000) == 800);
  CHECK(threshold_cents(999, 800000) == 800);   // 799.2 -> 800: 799 is still under 80%
  CHECK(threshold_cents(1001, 800000) == 801);  // 800.8 -> 801
  CHECK(threshold_cents(1, 1) == 1);            // a millionth of a cent still needs a cent
  CHECK(threshold_cents(0, 800000) == 0);
  CHECK(threshold_cents(12345, 1000000) == 12345);
  // 128-bit arithmetic: the largest budget does not overflow, and never passes authorised
  CHECK(threshold_cents(INT64_MAX, 1000000) == INT64_MAX);
  CHECK(threshold_cents(INT64_MAX, 999999) < INT64_MAX);
}

TEST_CASE("ladder: the step is the highest threshold reached, unset steps are skipped") {
  LadderCents c = thresholds(1000, {500000, 700000, 900000});
  CHECK(step_for(0, c) == LadderStep::normal);
  CHECK(step_for(499, c) == LadderStep::normal);
  CHECK(step_for(500, c) == LadderStep::warn);
  CHECK(step_for(700, c) == LadderStep::degrade);
  CHECK(step_for(899, c) == LadderStep::degrade);
  CHECK(step_for(900, c) == LadderStep::stop);
  LadderCents only_stop = thresholds(1000, {std::nullopt, std::nullopt, 1000000});
  CHECK(step_for(999, only_stop) == LadderStep::normal);
  CHECK(step_for(1000, only_stop) == LadderStep::stop);
  // equal ratios: the highest step wins
  CHECK(step_for(800, thresholds(1000, {800000, 800000, 800000})) == LadderStep::stop);
  for (auto s : {LadderStep::normal, LadderStep::warn, LadderStep::degrade, LadderStep::stop})
    CHECK(parse_ladder_step(ladder_step_name(s)) == s);
}

TEST_CASE("ladder: a move describes itself for the log line and the alert") {
  LadderMove m;
  m.activity = "act";
  m.from = LadderStep::normal;
  m.to = LadderStep::warn;
  m.consumed_cents = 8000;
  m.authorised_cents = 10000;
  m.ratios = {800000, 900000, 1000000};
  CHECK(m.up());
  CHECK(describe(m) == "budget ladder of act: normal -> warn (consumed 8000 of 10000 cents, 80.00%; warn_at 0.8)");
  m.from = LadderStep::degrade;
  m.to = LadderStep::normal;
  m.authorised_cents = 20000;
  CHECK_FALSE(m.up());
  CHECK(describe(m) ==
        "budget ladder of act: degrade -> normal (consumed 8000 of 20000 cents, 40.00%; back under degrade_at 0.9)");
}
