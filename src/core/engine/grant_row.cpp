#include "core/engine/grant_row.hpp"

#include "core/audit.hpp"

namespace rc::engine {

std::optional<int64_t> insert_grant(store::Session& s, const NewGrant& g, Millis now) {
  static const std::string kInsert =
      "INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state, bucket, "
      "draw_value, pool_version, degraded_from, channel, source, list_item_id, expires_at, created_at, updated_at, "
      "reason) VALUES ($1, $2, $3, $4, $5, $6, $7, 'init', $8, $9, $10, $11, $12, $13, $14, $15, $16, $16, $17) "
      "ON CONFLICT (biz_id) DO NOTHING RETURNING id";
  store::Params params{g.record_code,          g.biz_id,           g.activity_id,
                       g.prize_id,             g.user,             g.amount,
                       g.cost_cents,           g.bucket,           store::opt(g.draw_value),
                       store::opt(g.pool_version), store::opt(g.degraded_from), g.channel,
                       store::opt(g.source),   store::opt(g.list_item_id), store::opt(g.expires_at),
                       now,                    store::opt(g.reason)};
  if (s.dialect() == store::Dialect::postgres) {
    // One round trip for the grant and its status-log row (a data-modifying CTE): fewer round
    // trips per claim is what keeps PostgreSQL's throughput close to the raw claim.
    // The same statement reads the activity's version (activity_gate.hpp, check_version): a grant
    // is written under the version whose rules the claim followed, or the claim runs again.
    params.insert(params.end(), {g.actor, g.why});
    auto ins = s.query("WITH g AS (" + kInsert +
                           "), l AS (" + kStatusLogInsert + "SELECT 'grant', g.id, NULL, 'init', $18, $19, NULL, $16 FROM g "
                           "RETURNING entity_id) SELECT l.entity_id, (SELECT a.version FROM activity a WHERE a.id = $3) "
                           "FROM l",
                       params);
    if (ins.empty()) return std::nullopt;
    const int64_t id = ins[0].i64(0), version = ins[0].i64(1);  // the grant's id; the activity's version now
    if (g.pool_version && version != *g.pool_version)
      throw store::Retryable("activity switched to a new version during the claim: the claim runs again under it");
    return id;
  }
  auto ins = s.query(kInsert, params);
  if (ins.empty()) return std::nullopt;
  int64_t id = ins[0].i64(0);
  log_created(s, id, GrantState::init, g.actor, g.why, now);
  return id;
}

void set_grant_bucket(store::Session& s, int64_t grant_id, int64_t bucket) {
  s.exec("UPDATE grants SET bucket = $1 WHERE id = $2", {bucket, grant_id});
}

}  // namespace rc::engine
