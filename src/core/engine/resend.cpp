#include "core/engine/resend.hpp"

#include <algorithm>
#include <random>

#include "core/audit.hpp"

namespace rc::engine {

void ensure_resend(store::Session& s, const DeliveryTarget& t, const std::string& bill, Millis due, Millis expires,
                   const std::string& actor, Millis now) {
  auto r = s.query(
      "INSERT INTO resend_bill (user_id, grant_id, bill_no, state, attempts, next_attempt_at, expires_at, created_at, "
      "updated_at) VALUES ($1, $2, $3, 'pending', 0, $4, $5, $6, $6) ON CONFLICT (user_id, grant_id) DO NOTHING "
      "RETURNING id",
      {t.user, t.id, bill, due, expires, now});
  if (!r.empty())
    log_created(s, r[0].i64(0), ResendState::pending, actor, "bill " + bill, now);
  // A resend of an existing bill: it falls due again only once this call has certainly timed out,
  // so a concurrent resend cannot take the delivery over while it is in flight.
  else
    s.exec("UPDATE resend_bill SET next_attempt_at = $2, updated_at = $3 WHERE grant_id = $1 AND state = 'pending' "
           "AND next_attempt_at < $2",
           {t.id, due, now});
}

void finish_resend(store::Session& s, int64_t grant_id, ResendState to, const std::string& actor,
                   const std::string& why, Millis now) {
  auto r = s.query("SELECT id FROM resend_bill WHERE grant_id = $1 AND state = 'pending'", {grant_id});
  for (auto& row : r.rows) transition(s, row.i64(0), ResendState::pending, to, actor, why, now);
}

bool resend_due(store::Session& s, int64_t grant_id, Millis now) {
  return !s.query("SELECT 1 FROM resend_bill WHERE grant_id = $1 AND state = 'pending' AND next_attempt_at <= $2",
                  {grant_id, now})
              .empty();
}

void reschedule_resend(store::Session& s, int64_t grant_id, int64_t first_delay_ms, const std::string& why, Millis now) {
  auto a = s.query("SELECT attempts FROM resend_bill WHERE grant_id = $1 AND state = 'pending'", {grant_id});
  int64_t attempts = a.empty() ? 0 : a[0].i64(0);
  int64_t delay = resend_delay_ms(attempts, first_delay_ms);
  s.exec(
      "UPDATE resend_bill SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3, updated_at = $4 "
      "WHERE grant_id = $1 AND state = 'pending'",
      {grant_id, now + delay, why, now});
}

int64_t resend_delay_ms(int64_t attempts, int64_t first_ms, int64_t cap_ms) {
  int64_t base = first_ms;
  for (int64_t i = 0; i < attempts && base < cap_ms; ++i) base *= 2;
  base = std::min(base, cap_ms);
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_int_distribution<int64_t> d(0, base / 5);
  return base - d(rng);
}

}  // namespace rc::engine
