#include "core/alert_outbox.hpp"

#include <spdlog/spdlog.h>

#include "core/audit.hpp"

namespace rc {

int64_t queue_alert(store::Session& s, const std::string& kind, std::optional<int64_t> activity_id,
                    nlohmann::json body, Millis now) {
  body["alert"] = kind;
  const int64_t id = s.query("INSERT INTO alert_outbox (kind, activity_id, body, state, created_at, updated_at) "
                             "VALUES ($1, $2, '', 'pending', $3, $3) RETURNING id",
                             {kind, store::opt(activity_id), now})[0]
                         .i64(0);
  body["alert_id"] = id;
  s.exec("UPDATE alert_outbox SET body = $2 WHERE id = $1",
         {id, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
  log_created(s, id, AlertState::pending, "rewardctl", kind, now);
  return id;
}

AlertResult deliver_alert(store::Store& st, int64_t id, const AlertPoster& post, const std::string& actor,
                          Millis now, bool final) {
  auto r = st.autocommit().query("SELECT kind, body, attempts FROM alert_outbox WHERE id = $1 AND state = 'pending'",
                                 {id});
  if (r.empty()) return AlertResult::gone;
  const std::string kind = r[0].str(0), body = r[0].str(1);
  const int64_t attempts = r[0].i64(2);
  if (!post && !final) return AlertResult::left;
  AlertState to = AlertState::skipped;
  std::string why = "no [alerts] webhook configured";
  if (post) {
    bool ok = false;
    std::string error;
    try {
      ok = post(nlohmann::json::parse(body));
      if (!ok) error = "the [alerts] webhook did not accept it (see the error line of that time)";
    } catch (const std::exception& e) {
      error = e.what();
    }
    to = AlertState::sent;
    why = "posted to the [alerts] webhook";
    if (!ok) {
      const bool last = attempts + 1 >= kMaxAlertAttempts;
      spdlog::error("{} alert {} not sent{}: {}", kind, id,
                    last ? ", given up after " + std::to_string(kMaxAlertAttempts) + " attempts"
                         : std::string(" (fuse-scan retries it)"),
                    error);
      bool moved = false;
      st.transact(store::TxMode::write, [&](store::Tx& tx) {
        if (last)
          moved = transition(tx, id, AlertState::pending, AlertState::failed, actor,
                             "given up after " + std::to_string(kMaxAlertAttempts) + " attempts: " + error.substr(0, 300),
                             now, ", attempts = attempts + 1, last_error = $5", {error.substr(0, 500)});
        else
          tx.exec("UPDATE alert_outbox SET attempts = attempts + 1, last_error = $2, updated_at = $3 WHERE id = $1 AND "
                  "state = 'pending'",
                  {id, error.substr(0, 500), now});
      });
      return moved ? AlertResult::given_up : AlertResult::retrying;
    }
  }
  bool moved = false;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    moved = transition(tx, id, AlertState::pending, to, actor, why, now, ", attempts = attempts + $5",
                       {int64_t(post ? 1 : 0)});
  });
  if (!moved) return AlertResult::gone;
  return post ? AlertResult::sent : AlertResult::skipped;
}

AlertCounts deliver_pending(store::Store& st, const AlertPoster& post, const std::string& actor, Millis now,
                            Millis created_before, int64_t limit, const std::function<bool()>& more) {
  AlertCounts c;
  auto ids = st.autocommit().query("SELECT id FROM alert_outbox WHERE state = 'pending' AND created_at <= $1 "
                                   "ORDER BY attempts, created_at, id LIMIT $2",
                                   {created_before, limit});
  for (const auto& row : ids.rows) {
    if (more && !more()) break;
    switch (deliver_alert(st, row.i64(0), post, actor, now, true)) {
      case AlertResult::sent: ++c.sent; break;
      case AlertResult::skipped: ++c.skipped; break;
      case AlertResult::retrying:
      case AlertResult::given_up: ++c.failed; break;
      case AlertResult::left:
      case AlertResult::gone: break;
    }
  }
  return c;
}

int64_t pending_alerts(store::Session& s, Millis created_before) {
  return s.query("SELECT count(*) FROM alert_outbox WHERE state = 'pending' AND created_at <= $1", {created_before})[0]
      .i64(0);
}

}  // namespace rc
