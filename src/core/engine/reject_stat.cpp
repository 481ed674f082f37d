#include "core/engine/reject_stat.hpp"

#include <spdlog/spdlog.h>

namespace rc::engine {

void count_rejection(store::Store& st, const std::string& activity_code, Reason reason, Millis now) {
  const Millis minute = now - now % 60000;
  try {
    st.exec(
        "INSERT INTO claim_reject (activity_id, minute_at, reason, n) "
        "SELECT a.id, $2, $3, 1 FROM activity a WHERE a.code = $1 "
        "ON CONFLICT (activity_id, minute_at, reason) DO UPDATE SET n = claim_reject.n + 1",
        {activity_code, minute, reason == Reason::none ? std::string("unknown") : std::string(name(reason))});
  } catch (const Error& e) {
    spdlog::warn("claim activity={} reason={}: the rejection was not counted: {}", activity_code, name(reason), e.what());
  }
}

}  // namespace rc::engine
