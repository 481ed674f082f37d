#include "core/engine/qualification.hpp"

#include "core/audit.hpp"
#include "core/engine/rejection.hpp"

namespace rc::engine {

int64_t use_qualification(store::Session& s, int64_t activity_id, const std::string& user, Millis now) {
  auto q = s.query(
      "UPDATE qualification SET status = 'used', updated_at = $3 WHERE activity_id = $1 AND user_id = $2 "
      "AND status = 'unused' AND (expires_at IS NULL OR expires_at > $3) RETURNING id",
      {activity_id, user, now});
  if (!q.empty()) return q[0].i64(0);
  auto st = s.query("SELECT status FROM qualification WHERE activity_id = $1 AND user_id = $2", {activity_id, user});
  const bool used = !st.empty() && state_from_db<QualificationStatus>(st[0].str(0)) == QualificationStatus::used;
  throw Rejection{used ? Reason::qualification_used : Reason::not_qualified};
}

void log_qualification_used(store::Session& s, int64_t qualification_id, const std::string& actor,
                            const std::string& record_code, Millis now) {
  log_moved(s, qualification_id, QualificationStatus::unused, QualificationStatus::used, actor, "claim " + record_code,
            now);
}

}  // namespace rc::engine
