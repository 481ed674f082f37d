#include "core/engine/release.hpp"

#include "core/engine/budget.hpp"
#include "core/engine/limits.hpp"
#include "core/engine/stock.hpp"
#include "core/states.hpp"

namespace rc::engine {

GivenBack give_back(store::Session& tx, int64_t grant_id) {
  auto info = tx.query(
      "SELECT g.activity_id, g.prize_id, g.bucket, a.timezone, a.user_limit_period, p.user_limit_period, "
      "a.user_limit, p.user_limit, p.buckets, g.user_id, g.cost_cents, g.created_at, "
      "(SELECT count(*) FROM budget b WHERE b.activity_id = g.activity_id) "
      "FROM grants g JOIN activity a ON a.id = g.activity_id JOIN prize p ON p.id = g.prize_id WHERE g.id = $1",
      {grant_id});
  if (info.empty()) throw Error(Errc::internal, "grant " + std::to_string(grant_id) + " not found to give back");
  const auto& x = info[0];
  const int64_t activity_id = x.i64(0), prize_id = x.i64(1), cost = x.i64(10);
  const std::string user = x.str(9), tz = x.str(3);
  const Millis made = x.i64(11);
  GivenBack g;
  g.bucket = x.is_null(2) ? preferred_bucket(user, x.i64(8)) : x.i64(2);
  if (!x.is_null(6)) {
    auto per = parse_period(x.str_or(4, "total")).value_or(Period::total);
    return_limit(tx, scope_activity(activity_id), user, period_key(per, made, tz));
  }
  if (!x.is_null(7)) {
    auto per = parse_period(x.str_or(5, "total")).value_or(Period::total);
    return_limit(tx, scope_prize(prize_id), user, period_key(per, made, tz));
  }
  if (cost > 0 && x.i64(12) > 0) {
    return_budget(tx, activity_id, cost);
    g.budget_cents = cost;
  }
  return_stock(tx, prize_id, g.bucket);
  return g;
}

std::optional<Released> release_holdings(store::Session& tx, int64_t grant_id, const std::string& actor,
                                         const std::string& why, Millis now) {
  auto st = tx.query("SELECT state FROM grants WHERE id = $1", {grant_id});
  if (st.empty() || state_from_db<GrantState>(st[0].str(0)) != GrantState::failed) return std::nullopt;
  // The once-only guard, first: a grant released before already has this row, and then nothing
  // below runs. (Its reason is completed with what went back at the end.)
  if (tx.exec("INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, request_id, created_at) "
              "VALUES ('grant', $1, 'failed', 'failed', $2, $3, 'release', $4) "
              "ON CONFLICT (entity, entity_id, request_id) WHERE request_id IS NOT NULL DO NOTHING",
              {grant_id, actor, why.substr(0, 500), now}) != 1)
    return std::nullopt;
  Released r;
  r.back = give_back(tx, grant_id);
  r.note = "released stock 1 to bucket " + std::to_string(r.back.bucket) + ", budget " +
           std::to_string(r.back.budget_cents) + " cents, limit counts (" + why + ")";
  tx.exec("UPDATE status_log SET reason = $2 WHERE entity = 'grant' AND entity_id = $1 AND request_id = 'release'",
          {grant_id, r.note.substr(0, 500)});
  return r;
}

std::optional<std::string> release_note(store::Session& s, int64_t grant_id) {
  auto r = s.query("SELECT reason FROM status_log WHERE entity = 'grant' AND entity_id = $1 AND request_id = 'release'",
                   {grant_id});
  if (r.empty()) return std::nullopt;
  return r[0].str_or(0, "released");
}

}  // namespace rc::engine
