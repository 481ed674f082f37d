#include "core/engine/budget.hpp"

#include "core/engine/rejection.hpp"

namespace rc::engine {

void take_budget(store::Session& s, int64_t activity_id, int64_t cost_cents) {
  int64_t n = s.exec(
      "UPDATE budget SET consumed_cents = consumed_cents + $2 WHERE activity_id = $1 "
      "AND consumed_cents <= authorised_cents - $2",
      {activity_id, cost_cents});
  if (n != 1) throw Rejection{"budget_exhausted"};
}

void return_budget(store::Session& s, int64_t activity_id, int64_t cost_cents) {
  s.exec("UPDATE budget SET consumed_cents = consumed_cents - $2 WHERE activity_id = $1 AND consumed_cents >= $2",
         {activity_id, cost_cents});
}

int64_t budget_left_cents(store::Session& s, int64_t activity_id) {
  auto b = s.query("SELECT authorised_cents - consumed_cents FROM budget WHERE activity_id = $1", {activity_id});
  return b.empty() ? 0 : b[0].i64(0);
}

}  // namespace rc::engine
