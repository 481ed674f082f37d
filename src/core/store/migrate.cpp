#include "core/store/migrate.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/embedded.hpp"
#include "util/hash.hpp"

namespace rc::store {
namespace {

const char* kCreateTable =
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
    "checksum TEXT NOT NULL, applied_at BIGINT NOT NULL)";
// PostgreSQL only: the stored functions' sources as last run, and the newest schema version the
// binary that ran them knew.
const char* kCreateFunctions =
    "CREATE TABLE IF NOT EXISTS schema_functions (name TEXT PRIMARY KEY, checksum TEXT NOT NULL, "
    "schema_version INTEGER NOT NULL, applied_at BIGINT NOT NULL)";

bool functions_table_exists(Session& s) {
  return !s.query("SELECT to_regclass('schema_functions')::text").rows[0].is_null(0);
}

// The stored functions migrate would run (SchemaStatus::functions_stale), for a binary whose
// newest schema version is `latest`.
std::vector<const embedded::Function*> stale_functions(Session& s, int latest) {
  std::vector<const embedded::Function*> out;
  if (s.dialect() != Dialect::postgres) return out;
  const bool table = functions_table_exists(s);
  for (const auto& f : embedded::functions()) {
    auto r = table ? s.query("SELECT checksum, schema_version FROM schema_functions WHERE name = $1", {f.name})
                   : Result{};
    if (r.empty() || (r[0].str(0) != sha256_hex(f.sql) && r[0].i64(1) <= latest)) out.push_back(&f);
  }
  return out;
}

std::vector<const embedded::Migration*> known(Dialect d) {
  std::vector<const embedded::Migration*> out;
  for (const auto& m : embedded::migrations())
    if (m.dialect == dialect_name(d)) out.push_back(&m);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->version < b->version; });
  return out;
}

bool table_exists(Session& s) {
  if (s.dialect() == Dialect::sqlite)
    return !s.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").empty();
  return !s.query("SELECT to_regclass('schema_migrations')::text").rows[0].is_null(0);
}

std::vector<AppliedMigration> read_applied(Session& s) {
  std::vector<AppliedMigration> out;
  if (!table_exists(s)) return out;
  auto r = s.query("SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version");
  for (auto& row : r.rows) out.push_back({int(row.i64(0)), row.str(1), row.str(2), row.i64(3)});
  return out;
}

SchemaStatus compute(Dialect d, std::vector<AppliedMigration> applied) {
  SchemaStatus st;
  st.applied = std::move(applied);
  auto ms = known(d);
  st.latest = ms.empty() ? 0 : ms.back()->version;
  for (auto& a : st.applied) st.current = std::max(st.current, a.version);
  for (auto* m : ms) {
    auto it = std::find_if(st.applied.begin(), st.applied.end(), [&](auto& a) { return a.version == m->version; });
    if (it == st.applied.end()) st.pending.push_back(m->name);
    else if (it->checksum != sha256_hex(m->sql)) st.modified.push_back(m->name);
  }
  return st;
}

}  // namespace

SchemaStatus schema_status(Store& s) {
  SchemaStatus st;
  s.transact(TxMode::read, [&](Tx& tx) {
    st = compute(s.dialect(), read_applied(tx));
    for (auto* f : stale_functions(tx, st.latest)) st.functions_stale.push_back(f->name);
  });
  return st;
}

std::vector<std::string> migrate(Store& s, Millis now, std::vector<std::string>* functions) {
  std::vector<std::string> done, ran;
  s.transact(TxMode::write, [&](Tx& tx) {
    done.clear();
    ran.clear();
    if (tx.dialect() == Dialect::postgres) tx.query("SELECT pg_advisory_xact_lock(7261746)");
    tx.exec_script(kCreateTable);
    auto st = compute(tx.dialect(), read_applied(tx));
    if (st.newer())
      throw Error(Errc::config, "the database schema is at version " + std::to_string(st.current) +
                                    ", newer than this rewardctl knows (" + std::to_string(st.latest) +
                                    "): upgrade rewardctl");
    for (auto* m : known(tx.dialect())) {
      if (std::find(st.pending.begin(), st.pending.end(), m->name) == st.pending.end()) continue;
      tx.exec_script(m->sql);
      tx.exec("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)",
              {int64_t(m->version), m->name, sha256_hex(m->sql), now});
      done.push_back(m->name);
    }
    if (tx.dialect() != Dialect::postgres) return;
    tx.exec_script(kCreateFunctions);
    for (auto* f : stale_functions(tx, st.latest)) {
      tx.exec_script(f->sql);
      tx.exec("INSERT INTO schema_functions (name, checksum, schema_version, applied_at) VALUES ($1, $2, $3, $4) "
              "ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, schema_version = EXCLUDED.schema_version, "
              "applied_at = EXCLUDED.applied_at",
              {f->name, sha256_hex(f->sql), int64_t(st.latest), now});
      ran.push_back(f->name);
    }
  });
  if (functions) *functions = ran;
  return done;
}

void require_current_schema(Store& s) {
  auto st = schema_status(s);
  for (auto& m : st.modified)
    spdlog::warn("migration {} changed after it was applied to {}: the schema may differ from this binary's", m,
                 s.describe());
  if (st.newer())
    throw Error(Errc::config, "the database schema (version " + std::to_string(st.current) +
                                  ") is newer than this rewardctl knows (" + std::to_string(st.latest) +
                                  "): upgrade rewardctl");
  if (!st.pending.empty())
    throw Error(Errc::config, std::to_string(st.pending.size()) + " migration(s) pending on " + s.describe() +
                                  ": run `rewardctl db migrate` first");
  for (auto& f : st.functions_stale)
    spdlog::warn("stored function {} on {} is not this binary's: run `rewardctl db migrate` to bring it up to date", f,
                 s.describe());
}

}  // namespace rc::store
