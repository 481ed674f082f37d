#include "core/engine/resend.hpp"

#include <algorithm>

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
    log_status(s, {"resend_bill", r[0].i64(0), std::nullopt, "pending", actor, "bill " + bill, std::nullopt}, now);
}

void finish_resend(store::Session& s, int64_t grant_id, const std::string& to, const std::string& actor,
                   const std::string& why, Millis now) {
  auto r = s.query("SELECT id FROM resend_bill WHERE grant_id = $1 AND state = 'pending'", {grant_id});
  for (auto& row : r.rows) transition(s, "resend_bill", "resend_bill", row.i64(0), "pending", to, actor, why, now);
}

bool resend_due(store::Session& s, int64_t grant_id, Millis now) {
  return !s.query("SELECT 1 FROM resend_bill WHERE grant_id = $1 AND state = 'pending' AND next_attempt_at <= $2",
                  {grant_id, now})
              .empty();
}

void reschedule_resend(store::Session& s, int64_t grant_id, int64_t first_delay_ms, const std::string& why, Millis now) {
  auto a = s.query("SELECT attempts FROM resend_bill WHERE grant_id = $1 AND state = 'pending'", {grant_id});
  int64_t attempts = a.empty() ? 0 : a[0].i64(0);
  int64_t delay = std::min<int64_t>(first_delay_ms << std::min<int64_t>(attempts, 6), 3'600'000);
  s.exec(
      "UPDATE resend_bill SET attempts = attempts + 1, next_attempt_at = $2, last_error = $3, updated_at = $4 "
      "WHERE grant_id = $1 AND state = 'pending'",
      {grant_id, now + delay, why, now});
}

}  // namespace rc::engine
