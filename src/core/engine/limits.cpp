#include "core/engine/limits.hpp"

#include "core/engine/rejection.hpp"

namespace rc::engine {

std::string scope_activity(int64_t id) { return "a:" + std::to_string(id); }
std::string scope_prize(int64_t id) { return "p:" + std::to_string(id); }
std::string scope_draws(int64_t id) { return "d:" + std::to_string(id); }

void take_limit(store::Session& s, const std::string& scope, const std::string& user, const std::string& period_key,
                int64_t limit, Millis now) {
  if (limit <= 0) throw Rejection{Reason::limit_reached};
  // A counter already at its limit refuses without taking the row's lock (docs/design.md §4.3, "A
  // user at the limit waits for nobody"): the NOT EXISTS reads the committed counter, so the many
  // requests of one user past the limit never queue behind each other on that row; below the limit
  // the conditional upsert decides, under the row's lock, as before.
  int64_t n = s.exec(
      "INSERT INTO limit_counter (scope, user_id, period_key, used, updated_at) SELECT $1, $2, $3, 1, CAST($4 AS BIGINT) "
      "WHERE NOT EXISTS (SELECT 1 FROM limit_counter WHERE scope = $1 AND user_id = $2 AND period_key = $3 "
      "AND used >= $5) "
      "ON CONFLICT (scope, user_id, period_key) DO UPDATE SET used = limit_counter.used + 1, "
      "updated_at = excluded.updated_at WHERE limit_counter.used < $5",
      {scope, user, period_key, now, limit});
  if (n != 1) throw Rejection{Reason::limit_reached};
}

void return_limit(store::Session& s, const std::string& scope, const std::string& user, const std::string& period_key) {
  s.exec("UPDATE limit_counter SET used = used - 1 WHERE scope = $1 AND user_id = $2 AND period_key = $3 AND used > 0",
         {scope, user, period_key});
}

int64_t count_draw(store::Session& s, int64_t activity_id, const std::string& user, Millis now) {
  auto res = s.query(
      "INSERT INTO limit_counter (scope, user_id, period_key, used, updated_at) VALUES ($1, $2, 'total', 1, $3) "
      "ON CONFLICT (scope, user_id, period_key) DO UPDATE SET used = limit_counter.used + 1, "
      "updated_at = excluded.updated_at RETURNING used",
      {scope_draws(activity_id), user, now});
  return res[0].i64(0);
}

}  // namespace rc::engine
