// The switch of a running activity to a reviewed version (contract in versions.hpp: switch_to).
//
// Why a lock and a conditional update: a claim reads the activity's version once and then follows
// that version's rules to its commit. On PostgreSQL (READ COMMITTED) a switch that commits between
// that read and the claim's commit would let a grant of version N land after N+1 took over (a prize
// N+1 removed, granted after the switch). Every claim holds the activity's claim lock in share mode
// from its first read to its commit; the switch takes it exclusively, so it waits for the claims in
// flight and the claims that come after it queue behind it (a fair lock: a stream of claims cannot
// starve the switch). SQLite serializes writers anyway. The conditional update of the version
// (WHERE version = N) decides between two switches.
#include <nlohmann/json.hpp>

#include <map>
#include <set>

#include "core/activity/children.hpp"
#include "core/activity/versions.hpp"
#include "core/audit.hpp"
#include "core/budget_ladder.hpp"
#include "base/error.hpp"

namespace rc::activity {

using store::kNull;
using store::Tx;

std::string claim_lock_args(const std::string& code_sql) {
  // advisory locks are per database: the schema keeps two rewardctl schemas in one database apart
  return "7261750, hashtext(current_schema() || '/' || " + code_sql + ")";
}

namespace {

// Items by code: changed in place, new ones added; an item the version lacks stays (old grants and
// retired prizes name it).
std::map<std::string, int64_t> upsert_items(Tx& tx, int64_t activity_id, const Definition& d) {
  std::map<std::string, int64_t> ids;
  for (const auto& it : d.items) {
    auto r = tx.query("UPDATE item SET kind = $3, unit_cost_cents = $4, channel = $5 WHERE activity_id = $1 AND code = $2 "
                      "RETURNING id",
                      {activity_id, it.code, it.kind, it.unit_cost_cents, it.channel});
    ids[it.code] = r.empty() ? insert_item(tx, activity_id, it) : r[0].i64(0);
  }
  return ids;
}

// A row's id and its name (a prize's code, a fuse rule's name).
struct NamedRow {
  int64_t id = 0;
  std::string name;
};
// The rows of `sql`, a SELECT of (id, name) with the activity's id as $1.
std::vector<NamedRow> named_rows(Tx& tx, const std::string& sql, int64_t activity_id) {
  std::vector<NamedRow> out;
  for (auto& r : tx.query(sql, {activity_id}).rows) out.push_back({r.i64(0), r.str(1)});
  return out;
}

}  // namespace

std::vector<std::string> switch_to(Tx& tx, const ActivityRow& a, const VersionRow& v, const Definition& d,
                                   const std::string& who, Millis now) {
  if (tx.dialect() == store::Dialect::postgres)
    tx.query("SELECT 1 FROM (SELECT pg_advisory_xact_lock(" + claim_lock_args("$1::text") + ")) x", {a.code});
  std::vector<std::string> did;
  const VersionState from_state = v.state;

  // 1. the versions: N superseded, N+1 current (in this order: one current row at a time)
  auto cur = tx.query("SELECT id FROM activity_version WHERE activity_id = $1 AND state = 'current'", {a.id});
  if (!cur.empty() && !transition(tx, cur[0].i64(0), VersionState::current, VersionState::superseded, who,
                                  "switched to version " + std::to_string(v.version), now))
    throw store::Retryable("the running version changed concurrently");
  if (!transition(tx, v.id, from_state, VersionState::current, who,
                  "approved as tech: switched from version " + std::to_string(a.version), now,
                  ", switched_at = $2, decided_by = $5", {who}))
    throw store::Retryable("the version in review changed concurrently");

  // 2. the activity: one conditional update of its version; claims from now on load N+1's catalog
  int64_t n = tx.exec(
      "UPDATE activity SET name = $3, timezone = $4, start_at = $5, end_at = $6, whitelist_required = $7, user_limit = $8, "
      "user_limit_period = $9, definition = $10, definition_hash = $11, updated_at = $12, version = $13 "
      "WHERE id = $1 AND version = $2",
      {a.id, a.version, d.name, d.timezone, d.start_at, d.end_at, int64_t(d.whitelist_required ? 1 : 0),
       d.limit ? store::Value(d.limit->count) : kNull,
       d.limit ? store::Value(std::string(period_name(d.limit->period))) : kNull, v.definition, v.definition_hash, now,
       v.version});
  if (n != 1) throw store::Retryable("activity '" + a.code + "' switched version concurrently");
  did.push_back("switched '" + a.code + "' from version " + std::to_string(a.version) + " to version " +
                std::to_string(v.version));

  // 3. prizes by code: a prize keeps its id, stock and buckets; new ones get theirs; missing ones retire
  auto items = upsert_items(tx, a.id, d);
  std::map<std::string, int64_t> prize_ids;
  std::set<std::string> added, retired;
  for (const auto& p : d.prizes) {
    store::Params params{a.id, p.code};
    auto rest = prize_params(d, p, items.at(p.item));
    params.insert(params.end(), rest.begin(), rest.end());
    auto r = tx.query("UPDATE prize SET item_id = $3, amount = $4, amount_max = $5, user_limit = $6, user_limit_period = $7, "
                      "weight = $8, consolation = $9, validity_days = $10, position = $11, high_value = $12, retired = 0 "
                      "WHERE activity_id = $1 AND code = $2 "
                      "RETURNING id",
                      params);
    if (r.empty()) {
      prize_ids[p.code] = insert_prize(tx, a.id, d, p, items.at(p.item));
      added.insert(p.code);
      did.push_back("prize " + p.code + " added with stock " + std::to_string(p.stock));
    } else {
      prize_ids[p.code] = r[0].i64(0);
    }
  }
  for (auto& p : named_rows(tx, "SELECT id, code FROM prize WHERE activity_id = $1 AND retired = 0", a.id)) {
    if (prize_ids.count(p.name)) continue;
    tx.exec("UPDATE prize SET retired = 1, consolation = 0 WHERE id = $1", {p.id});
    retired.insert(p.name);
    did.push_back("prize " + p.name + " retired: no longer drawn; its stock stays accounted");
  }

  // 4. budget: the running one carries over (activity budget changes it); a first one starts with
  // what the activity's grants already hold (the states reconcile counts as holding budget)
  auto b = tx.query("SELECT authorised_cents FROM budget WHERE activity_id = $1", {a.id});
  if (b.empty() && d.budget_cents) {
    const int64_t held = tx.query("SELECT COALESCE(SUM(cost_cents), 0) FROM grants WHERE activity_id = $1 AND state IN "
                                  "('init', 'issuing', 'success', 'delayed_resend', 'awaiting_external')",
                                  {a.id})[0]
                             .i64(0);
    if (held > *d.budget_cents)
      throw Error(Errc::conflict, "version " + std::to_string(v.version) + " of '" + a.code + "' sets a budget of " +
                                      std::to_string(*d.budget_cents) + " cents, but its grants already hold " +
                                      std::to_string(held) + ": nothing changed");
    tx.exec("INSERT INTO budget (activity_id, authorised_cents, consumed_cents) VALUES ($1, $2, $3)",
            {a.id, *d.budget_cents, held});
    did.push_back("budget of " + std::to_string(*d.budget_cents) + " cents added (" + std::to_string(held) +
                  " already held by grants)");
  }
  // the version's budget ladder: its ratios, the thresholds they give and the step (budget_ladder.hpp)
  tx.exec("UPDATE budget SET warn_ppm = $2, degrade_ppm = $3, stop_ppm = $4 WHERE activity_id = $1",
          {a.id, store::opt(d.ladder.warn_ppm), store::opt(d.ladder.degrade_ppm), store::opt(d.ladder.stop_ppm)});
  if (auto m = settle_ladder(tx, a.id, a.code, who, "version " + std::to_string(v.version), now))
    did.push_back(describe(*m));

  // 5. listed users: added (a live blacklist is never shortened by a file); 6. fuse rules by name
  add_listed_users(tx, a.id, d);
  std::set<std::string> rules;
  for (const auto& f : d.fuses) {
    rules.insert(f.name);
    store::Params params{a.id, f.name};
    auto rest = fuse_params(f, f.prize ? prize_ids.at(*f.prize) : 0);
    params.insert(params.end(), rest.begin(), rest.end());
    if (tx.exec("UPDATE fuse_rule SET prize_id = $3, window_seconds = $4, max_count = $5, max_amount_cents = $6, "
                "pop_percent = $7, dod_percent = $8, min_count = $9, enabled = 1 WHERE activity_id = $1 AND name = $2",
                params) == 0)
      insert_fuse_rule(tx, a.id, f, f.prize ? prize_ids.at(*f.prize) : 0);
  }
  for (auto& f : named_rows(tx, "SELECT id, name FROM fuse_rule WHERE activity_id = $1 AND enabled = 1", a.id))
    if (!rules.count(f.name)) {
      tx.exec("UPDATE fuse_rule SET enabled = 0 WHERE id = $1", {f.id});
      did.push_back("fuse rule " + f.name + " disabled");
    }

  audit(tx, who, "activity.version.switch", "activity", a.code,
        nlohmann::json{{"from_version", a.version}, {"to_version", v.version}, {"hash", v.definition_hash},
                       {"prizes_added", added}, {"prizes_retired", retired}}
            .dump(),
        now);
  return did;
}

}  // namespace rc::activity
