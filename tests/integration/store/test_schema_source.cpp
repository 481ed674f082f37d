// One schema source for both dialects (sql/NNNN_name.sql expanded by cmake/embed.cmake): the text
// each dialect gets for an applied migration never changes, and a database created by an older
// binary upgrades with `db migrate`.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "core/embedded.hpp"
#include "util/hash.hpp"
#include "support/harness.hpp"

using nlohmann::json;
using rt::TestDb;

namespace {

// SHA-256 of sql/<dialect>/0001_init.sql as the first binaries embedded it: the checksum every v1
// database has on record. If this changes, every existing database reports 0001 as modified.
const char* kV1Sqlite = "e1cb0c256c0fc792e46bfd95ee1f466f8f740754e5e06760525f1f49e2ec1949";
const char* kV1Postgres = "6dad19ed5422e6d2e4ce9fcc9ecd774552fae504955ea165cc1e36cdface1e99";

const rc::embedded::Migration& embedded(const std::string& dialect, int version) {
  for (auto& m : rc::embedded::migrations())
    if (m.dialect == dialect && m.version == version) return m;
  FAIL("no embedded migration " << version << " for " << dialect);
  throw 0;
}

}  // namespace

TEST_CASE("schema: the text of migration 0001 is byte-identical for each dialect to what v1 databases recorded") {
  CHECK(rc::sha256_hex(embedded("sqlite", 1).sql) == kV1Sqlite);
  CHECK(rc::sha256_hex(embedded("postgres", 1).sql) == kV1Postgres);
  // both dialects get every migration, expanded (no token left)
  size_t sqlite = 0, pg = 0;
  for (auto& m : rc::embedded::migrations()) {
    (m.dialect == "sqlite" ? sqlite : pg)++;
    CHECK(m.sql.find("{{") == std::string::npos);
    CHECK(m.sql.find("--@") == std::string::npos);
  }
  CHECK(sqlite == pg);
  CHECK(embedded("sqlite", 1).sql.find("BIGSERIAL") == std::string::npos);
  CHECK(embedded("postgres", 1).sql.find("INTEGER PRIMARY KEY") == std::string::npos);
}

TEST_CASE("schema: a database at v1 (as an older binary left it) upgrades with db migrate, keeping its data") {
  TestDb db;
  const std::string dialect = rt::is_pg() ? "postgres" : "sqlite";
  {
    // What the first binaries did: the bookkeeping table, 0001's text, its row with the v1 checksum.
    rc::store::StoreOptions o;
    o.create_if_missing = true;
    auto s = rc::store::open_store(rc::store::parse_dsn(db.url(), "test"), o);
    s->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
      tx.exec_script(
          "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
          "checksum TEXT NOT NULL, applied_at BIGINT NOT NULL)");
      tx.exec_script(embedded(dialect, 1).sql);
      tx.exec("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (1, '0001_init', $1, 0)",
              {std::string(rt::is_pg() ? kV1Postgres : kV1Sqlite)});
      tx.exec(
          "INSERT INTO activity (code, name, kind, state, definition, definition_hash, timezone, start_at, end_at, "
          "created_by, created_at, updated_at) VALUES ('old', 'old', 'direct', 'live', '{}', 'x', 'UTC', 0, 1, 't', 0, 0)");
    });
  }
  auto before = json::parse(db.ok({"db", "status", "-o", "json"}, 1).out);
  CHECK(before["current_version"] == 1);
  CHECK(before["modified"].empty());
  CHECK(before["pending"].size() >= 1);

  auto m = db.ok({"db", "migrate", "-o", "json"});
  CHECK(json::parse(m.out)["applied"] == before["pending"]);
  CHECK(m.err.find("changed after it was applied") == std::string::npos);
  auto after = json::parse(db.ok({"db", "status", "-o", "json"}).out);
  CHECK(after["state"] == "current");
  CHECK(after["modified"].empty());
  CHECK(db.count("SELECT count(*) FROM activity WHERE code = 'old'") == 1);
  // the v2 columns exist and work
  CHECK(db.count("SELECT count(*) FROM job_lock WHERE host IS NULL AND pid IS NULL AND job IS NULL") == 0);
}
