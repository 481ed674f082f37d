#pragma once
// Rule 8c, the budget ladder (docs/design.md §4.4): spending is not cut off
// in one blow but in steps, each decided by the ratio of consumed over authorised budget:
//   normal -> warn     (warn_at):    people are told (one WARN log line, one alert)
//          -> degrade  (degrade_at): the prizes marked high_value are switched off - a lottery draw
//                                    of one falls to the consolation prize, a direct claim of one is
//                                    refused budget_exhausted
//          -> stop     (stop_at):    every claim is refused budget_exhausted
// A step is reached when consumed >= ceil(authorised x ratio). The thresholds are kept in cents on
// the budget row (rewritten when the authorised budget changes), so a claim decides with plain
// comparisons inside the one conditional update it already makes (budget.hpp).
//
// The step last reached is stored on the budget row and moved only by move_step: one conditional
// update from the old step to the new one plus one status-log row (entity "budget", entity id = the
// activity), in the transaction that changed consumed or authorised. The row is locked by that
// change, so of many claims crossing a threshold at once exactly one moves the step; the log line
// and the alert follow its commit (Engine::announce_ladder), never inside the transaction; the alert
// is queued in the transaction (core/alert_outbox.hpp), so fuse-scan posts it if the process dies.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc {

enum class LadderStep { normal, warn, degrade, stop };
const char* ladder_step_name(LadderStep s);
LadderStep parse_ladder_step(const std::string& s);  // an unknown name is normal

// Ratios in millionths (0.8 = 800000); empty: the step is not configured.
struct LadderRatios {
  std::optional<int64_t> warn, degrade, stop;
  bool any() const { return warn || degrade || stop; }
};

// Thresholds in cents: the consumed amount from which each step is reached.
struct LadderCents {
  std::optional<int64_t> warn, degrade, stop;
};

// ceil(authorised x ppm / 1e6), computed in 128 bits. REQUIRES: authorised >= 0, 0 < ppm <= 1e6.
int64_t threshold_cents(int64_t authorised, int64_t ppm);
LadderCents thresholds(int64_t authorised, const LadderRatios& r);
// The highest step whose threshold `consumed` has reached.
LadderStep step_for(int64_t consumed, const LadderCents& c);

// A change of the stored step, for the log line and the alert.
struct LadderMove {
  int64_t activity_id = 0;
  std::string activity;  // code, for people (filled by the caller when it knows it)
  LadderStep from = LadderStep::normal, to = LadderStep::normal;
  int64_t consumed_cents = 0, authorised_cents = 0;
  LadderRatios ratios;
  Millis at = 0;
  std::optional<int64_t> alert_id;  // going up: the alert queued with the move (core/alert_outbox.hpp)
  bool up() const { return int(to) > int(from); }
};

// The body of the "budget_ladder" alert of a move going up.
nlohmann::json ladder_alert_body(const LadderMove& m);

// "budget ladder of CODE: normal -> warn (consumed 8000 of 10000 cents, 80.00%; warn_at 0.8)"
std::string describe(const LadderMove& m);
// The ratio of `ppm` as people write it: 0.8
std::string ratio_text(int64_t ppm);

// Moves the stored step m.from -> m.to: one conditional update and one status-log row; going up,
// it also queues the move's alert (sets m.alert_id), so a crash after the commit loses no alert.
// False (and nothing written) when the stored step was not m.from. REQUIRES: inside the transaction
// that changed consumed or authorised, holding the budget row.
bool move_step(store::Session& s, LadderMove& m, const std::string& actor, const std::string& why);

// After the authorised budget (or the ratios) of an activity changed in this transaction: rewrites
// the thresholds in cents and moves the step to what the ratio now is (logged). Returns the move, if
// any; nothing happens for an activity without a budget row or without a ladder.
std::optional<LadderMove> settle_ladder(store::Session& s, int64_t activity_id, const std::string& code,
                                        const std::string& actor, const std::string& why, Millis now);

}  // namespace rc
