#include "core/engine/release.hpp"

#include "core/audit.hpp"
#include "core/engine/budget.hpp"
#include "core/engine/limits.hpp"
#include "core/engine/stock.hpp"
#include "core/states.hpp"

namespace rc::engine {

namespace {

// What a grant holds and the rules it was counted under: what give_back returns.
struct Holdings {
  int64_t activity_id = 0, prize_id = 0;
  std::optional<int64_t> bucket;  // none: the grant names no bucket (the user's preferred one)
  std::string timezone;           // the activity's, for the limit's period key
  // each limit (activity's, prize's): set when it has a count, with its period (total when unset)
  std::optional<Period> activity_limit_period, prize_limit_period;
  int64_t prize_buckets = 1;
  std::string user;
  int64_t cost_cents = 0;
  Millis created_at = 0;
  bool has_budget = false;
};

Holdings to_holdings(const store::Row& x) {
  auto period = [&](size_t limit_col, size_t period_col) -> std::optional<Period> {
    if (x.is_null(limit_col)) return std::nullopt;
    return parse_period(x.str_or(period_col, "total")).value_or(Period::total);
  };
  Holdings h;
  h.activity_id = x.i64(0);
  h.prize_id = x.i64(1);
  h.bucket = x.opt_i64(2);
  h.timezone = x.str(3);
  h.activity_limit_period = period(6, 4);
  h.prize_limit_period = period(7, 5);
  h.prize_buckets = x.i64(8);
  h.user = x.str(9);
  h.cost_cents = x.i64(10);
  h.created_at = x.i64(11);
  h.has_budget = x.i64(12) > 0;
  return h;
}

}  // namespace

GivenBack give_back(store::Session& tx, int64_t grant_id) {
  auto info = tx.query(
      "SELECT g.activity_id, g.prize_id, g.bucket, a.timezone, a.user_limit_period, p.user_limit_period, "
      "a.user_limit, p.user_limit, p.buckets, g.user_id, g.cost_cents, g.created_at, "
      "(SELECT count(*) FROM budget b WHERE b.activity_id = g.activity_id) "
      "FROM grants g JOIN activity a ON a.id = g.activity_id JOIN prize p ON p.id = g.prize_id WHERE g.id = $1",
      {grant_id});
  if (info.empty()) throw Error(Errc::internal, "grant " + std::to_string(grant_id) + " not found to give back");
  const Holdings h = to_holdings(info[0]);
  GivenBack g;
  g.bucket = h.bucket ? *h.bucket : preferred_bucket(h.user, h.prize_buckets);
  if (h.activity_limit_period)
    return_limit(tx, scope_activity(h.activity_id), h.user, period_key(*h.activity_limit_period, h.created_at, h.timezone));
  if (h.prize_limit_period)
    return_limit(tx, scope_prize(h.prize_id), h.user, period_key(*h.prize_limit_period, h.created_at, h.timezone));
  if (h.cost_cents > 0 && h.has_budget) {
    return_budget(tx, h.activity_id, h.cost_cents);
    g.budget_cents = h.cost_cents;
  }
  return_stock(tx, h.prize_id, g.bucket);
  return g;
}

std::optional<Released> release_holdings(store::Session& tx, int64_t grant_id, const std::string& actor,
                                         const std::string& why, Millis now) {
  auto st = tx.query("SELECT state FROM grants WHERE id = $1", {grant_id});
  if (st.empty() || state_from_db<GrantState>(st[0].str(0)) != GrantState::failed) return std::nullopt;
  // The once-only guard, first: a grant released before already has this row, and then nothing
  // below runs. (Its reason is completed with what went back at the end.)
  if (tx.exec(kStatusLogInsert + "VALUES ('grant', $1, 'failed', 'failed', $2, $3, 'release', $4) "
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
