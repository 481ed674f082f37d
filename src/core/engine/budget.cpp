#include "core/engine/budget.hpp"

#include "core/engine/rejection.hpp"

#include <algorithm>
#include <limits>

namespace rc::engine {

namespace {

// The ladder's refusals are part of the one conditional update: past the stop step nothing is taken,
// past the degrade step nothing for a high-value prize. RETURNING hands back what the step is now.
const std::string kLadderTake =
    "UPDATE budget SET consumed_cents = consumed_cents + $2 WHERE activity_id = $1 "
    "AND consumed_cents <= authorised_cents - $2 AND (stop_cents IS NULL OR consumed_cents < stop_cents)";
const std::string kHighValue = " AND (degrade_cents IS NULL OR consumed_cents < degrade_cents)";
const std::string kReturning =
    " RETURNING authorised_cents, consumed_cents, ladder_step, warn_cents, degrade_cents, stop_cents, warn_ppm, "
    "degrade_ppm, stop_ppm";

// Why a ladder take was refused: budget_degrade when the budget is past the degrade step (but not
// at stop) and the prize is high-value - whether or not its cost would still have fitted: past
// degrade a high-value prize is switched off, and a lottery records the fall to its consolation
// prize as degraded - else budget_exhausted.
Reason refusal(store::Session& s, int64_t activity_id, bool high_value) {
  if (!high_value) return Reason::budget_exhausted;
  auto r = s.query("SELECT count(*) FROM budget WHERE activity_id = $1 AND (stop_cents IS NULL OR consumed_cents < "
                   "stop_cents) AND consumed_cents >= degrade_cents",
                   {activity_id});
  return r[0].i64(0) > 0 ? Reason::budget_degrade : Reason::budget_exhausted;
}

}  // namespace

std::optional<LadderMove> take_budget(store::Session& s, int64_t activity_id, int64_t cost_cents,
                                      const LadderTake* ladder) {
  if (!ladder) {
    int64_t n = s.exec(
        "UPDATE budget SET consumed_cents = consumed_cents + $2 WHERE activity_id = $1 "
        "AND consumed_cents <= authorised_cents - $2",
        {activity_id, cost_cents});
    if (n != 1) throw Rejection{Reason::budget_exhausted};
    return std::nullopt;
  }
  if (cost_cents == 0) {
    // Nothing to take, so no row lock: the stop step refuses every claim, the degrade step a
    // high-value prize, decided on the committed row.
    auto r = s.query("SELECT CASE WHEN stop_cents IS NOT NULL AND consumed_cents >= stop_cents THEN 2 "
                     "WHEN degrade_cents IS NOT NULL AND consumed_cents >= degrade_cents THEN 1 ELSE 0 END "
                     "FROM budget WHERE activity_id = $1",
                     {activity_id});
    const int64_t past = r.empty() ? 0 : r[0].i64(0);
    if (past == 2) throw Rejection{Reason::budget_exhausted};
    if (past == 1 && ladder->high_value) throw Rejection{Reason::budget_degrade};
    return std::nullopt;
  }
  auto r = s.query(kLadderTake + (ladder->high_value ? kHighValue : "") + kReturning, {activity_id, cost_cents});
  if (r.empty()) throw Rejection{refusal(s, activity_id, ladder->high_value)};
  const auto& row = r[0];
  LadderMove m;
  m.activity_id = activity_id;
  m.activity = ladder->code;
  m.authorised_cents = row.i64(0);
  m.consumed_cents = row.i64(1);
  m.from = parse_ladder_step(row.str_or(2, "normal"));
  m.to = step_for(m.consumed_cents, {row.opt_i64(3), row.opt_i64(4), row.opt_i64(5)});
  if (m.to == m.from) return std::nullopt;
  m.ratios = {row.opt_i64(6), row.opt_i64(7), row.opt_i64(8)};
  m.at = ladder->now;
  // The row is locked by the update above (PostgreSQL) or the write transaction (SQLite): the step
  // read with it is current, and this move cannot lose to another claim.
  if (!move_step(s, m, ladder->actor, "claim: " + describe(m))) return std::nullopt;
  return m;
}

void return_budget(store::Session& s, int64_t activity_id, int64_t cost_cents) {
  s.exec("UPDATE budget SET consumed_cents = consumed_cents - $2 WHERE activity_id = $1 AND consumed_cents >= $2",
         {activity_id, cost_cents});
}

namespace {

// An activity's budget row: what is authorised and consumed, and the ladder's thresholds.
struct BudgetRow {
  int64_t authorised = 0, consumed = 0;
  std::optional<int64_t> degrade, stop;  // the ladder's degrade and stop thresholds, when set
};

std::optional<BudgetRow> read_budget(store::Session& s, int64_t activity_id) {
  auto r = s.query("SELECT authorised_cents, consumed_cents, degrade_cents, stop_cents FROM budget WHERE activity_id = $1",
                   {activity_id});
  if (r.empty()) return std::nullopt;
  return BudgetRow{r[0].i64(0), r[0].i64(1), r[0].opt_i64(2), r[0].opt_i64(3)};
}

}  // namespace

std::optional<int64_t> budget_takes_left(store::Session& s, int64_t activity_id, int64_t cost_cents, bool high_value) {
  auto b = read_budget(s, activity_id);
  if (!b) return std::nullopt;
  const int64_t authorised = b->authorised, consumed = b->consumed;
  std::optional<int64_t> ceiling = b->stop;
  if (high_value && b->degrade) ceiling = ceiling ? std::min(*ceiling, *b->degrade) : *b->degrade;
  if (ceiling && consumed >= *ceiling) return 0;
  if (cost_cents <= 0) return std::numeric_limits<int64_t>::max();
  // in 128 bits: an authorised budget near INT64_MAX must not overflow the sums
  __int128 n = authorised > consumed ? (__int128(authorised) - consumed) / cost_cents : 0;
  // takes start at consumed, consumed + cost, ...: those starting below the ceiling are allowed
  if (ceiling) n = std::min(n, (__int128(*ceiling) - consumed + cost_cents - 1) / cost_cents);
  return int64_t(n);
}

int64_t budget_left_cents(store::Session& s, int64_t activity_id) {
  auto b = s.query("SELECT authorised_cents - consumed_cents FROM budget WHERE activity_id = $1", {activity_id});
  return b.empty() ? 0 : b[0].i64(0);
}

}  // namespace rc::engine
