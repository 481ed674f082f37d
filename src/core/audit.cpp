#include "core/audit.hpp"

namespace rc {

void log_status(store::Session& s, const StatusChange& c, Millis now) {
  s.exec(
      kStatusLogInsert + "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
      {c.entity, c.entity_id, store::opt(c.from), c.to, c.actor, store::opt(c.reason), store::opt(c.request_id), now});
}

bool transition(store::Session& s, const std::string& table, const std::string& entity, int64_t id,
                const std::string& from, const std::string& to, const std::string& actor,
                const std::optional<std::string>& reason, Millis now, const std::string& extra_set,
                const store::Params& extra, const std::optional<std::string>& request_id) {
  // The WHERE on the expected state decides who wins; the table name and column list are code,
  // never input.
  std::string col = table == "qualification" ? "status" : "state";
  store::Params p{to, now, id, from};
  p.insert(p.end(), extra.begin(), extra.end());
  int64_t n = s.exec("UPDATE " + table + " SET " + col + " = $1, updated_at = $2" + extra_set + " WHERE id = $3 AND " +
                         col + " = $4",
                     p);
  if (n != 1) return false;
  log_status(s, {entity, id, from, to, actor, reason, request_id}, now);
  return true;
}

void audit(store::Session& s, const std::string& op, const std::string& action, const std::string& entity,
           const std::string& key, const std::string& detail_json, Millis now) {
  s.exec("INSERT INTO audit (operator, action, entity, entity_key, detail, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
         {op, action, entity, key, detail_json, now});
}

}  // namespace rc
