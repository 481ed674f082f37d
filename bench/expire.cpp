// bench/expire: does expire's cost follow the due rows or the table? The same number of due rows
// (qualifications past expires_at and held grants past their expiry) sits in a small and in a large
// table of grants and qualifications; the run over each is timed in the same invocation, on SQLite
// and PostgreSQL. Goal: large/small time ratio <= 1.5. For scale, the same due rows are also
// changed by one raw UPDATE ... WHERE id IN (due ids) on each table ("raw").
//
//   bench/expire [--full] [--small N] [--large N] [--due N] [--pg CONNINFO] [--no-pg] [--no-sqlite] [-o json]
// Default (quick): 20,000 vs 200,000 rows with 2,000 due. --full: 100,000 vs 1,000,000 with 10,000 due.
// PostgreSQL: --pg, else $REWARDCTL_BENCH_PG, else $REWARDCTL_TEST_PG.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/store/migrate.hpp"
#include "jobs/expire/expire.hpp"

using namespace rc;
using Clk = std::chrono::steady_clock;

namespace {

const int64_t kNow = 1893456000000;  // 2030-01-01
const int64_t kPast = kNow - 86'400'000;
const int64_t kFuture = kNow + 86'400'000;

struct Db {
  std::unique_ptr<store::Store> s;
  store::Dsn dsn;
  std::string schema, pg;
  ~Db() {
    if (!schema.empty()) {
      s.reset();
      store::open_postgres(pg, {})->exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
    }
  }
};

std::unique_ptr<Db> fresh(const std::string& backend, const std::string& pg, int64_t rows, int64_t due) {
  auto d = std::make_unique<Db>();
  std::string url;
  if (backend == "sqlite") {
    std::string dir = "/tmp/rcbench_expire_" + std::to_string(getpid());
    std::string cmd = "mkdir -p " + dir;
    (void)!system(cmd.c_str());
    std::string path = dir + "/e" + std::to_string(rows) + ".db";
    for (auto suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
    url = "sqlite:" + path;
  } else {
    d->pg = pg;
    d->schema = "bench_expire_" + std::to_string(getpid()) + "_" + std::to_string(rows);
    auto s = store::open_postgres(pg, {});
    s->exec("DROP SCHEMA IF EXISTS " + d->schema + " CASCADE");
    s->exec("CREATE SCHEMA " + d->schema);
    url = pg + " options='-c search_path=" + d->schema + "'";
  }
  d->dsn = store::parse_dsn(url, "bench");
  store::StoreOptions o;
  o.create_if_missing = true;
  d->s = store::open_store(d->dsn, o);
  store::migrate(*d->s, 0);
  const bool is_pg = backend == "postgres";
  const std::string series = is_pg ? "SELECT i FROM generate_series(1, " + std::to_string(rows) + ") AS n(i)"
                                   : "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
                                         std::to_string(rows) + ") SELECT i FROM n";
  d->s->transact(store::TxMode::write, [&](store::Tx& tx) {
    int64_t a = tx.query("INSERT INTO activity (code, name, kind, state, definition, definition_hash, timezone, start_at, "
                         "end_at, created_by, created_at, updated_at) VALUES ('bench', 'bench', 'direct', 'live', '{}', "
                         "'x', 'UTC', 0, 4102444800000, 'bench', 0, 0) RETURNING id")[0]
                    .i64(0);
    int64_t item = tx.query("INSERT INTO item (activity_id, code, kind, unit_cost_cents, channel) VALUES ($1, 'c', "
                            "'coupon', 0, 'ledger') RETURNING id",
                            {a})[0]
                       .i64(0);
    int64_t p = tx.query("INSERT INTO prize (activity_id, code, item_id, amount, stock_total) VALUES ($1, 'p', $2, 1, "
                         "1000000000) RETURNING id",
                         {a, item})[0]
                    .i64(0);
    const std::string A = std::to_string(a), P = std::to_string(p), D = std::to_string(due);
    // qualifications: `due` past expiry; the rest either without expiry or expiring later, or used
    // with a past expiry (not due: only unused ones expire)
    tx.exec_script("INSERT INTO qualification (activity_id, user_id, status, expires_at, created_at, updated_at) "
                   "SELECT " + A + ", 'u' || CAST(i AS TEXT), CASE WHEN i <= " + D + " OR i % 3 <> 0 THEN 'unused' ELSE 'used' END, "
                   "CASE WHEN i <= " + D + " THEN " + std::to_string(kPast) + " WHEN i % 3 = 1 THEN NULL WHEN i % 3 = 2 THEN " +
                   std::to_string(kFuture) + " ELSE " + std::to_string(kPast) + " END, 0, 0 FROM (" + series + ") s");
    // grants: `due` held (pending) past expiry; the rest delivered, their validity long past
    tx.exec_script("INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state, "
                   "expires_at, created_at, updated_at) SELECT 'R' || CAST(i AS TEXT), 'B' || CAST(i AS TEXT), " + A + ", " +
                   P + ", 'u' || CAST(i AS TEXT), 1, 0, CASE WHEN i <= " + D + " THEN 'pending' ELSE 'success' END, " +
                   std::to_string(kPast) + ", 0, 0 FROM (" + series + ") s");
  });
  d->s->autocommit().exec_script("ANALYZE");
  return d;
}

struct Row {
  std::string backend;
  int64_t rows = 0, due = 0;
  double expire_s = 0, raw_s = 0;
};

Row measure(const std::string& backend, const std::string& pg, int64_t rows, int64_t due) {
  auto d = fresh(backend, pg, rows, due);
  Row r{backend, rows, due};
  // raw: the same due rows changed by two set-based UPDATEs, rolled back
  auto t0 = Clk::now();
  d->s->transact(store::TxMode::write, [&](store::Tx& tx) {
    int64_t n = tx.exec("UPDATE qualification SET status = 'expired' WHERE status = 'unused' AND expires_at <= $1", {kNow});
    n += tx.exec("UPDATE grants SET state = 'expired' WHERE state = 'pending' AND expires_at <= $1", {kNow});
    if (n != 2 * due) throw std::runtime_error("raw changed " + std::to_string(n) + " rows");
    tx.rollback_only();
  });
  r.raw_s = std::chrono::duration<double>(Clk::now() - t0).count();
  FixedClock clock(kNow);
  jobs::RunOptions o;
  o.operator_name = "bench";
  jobs::ExpireOptions eo;
  auto t1 = Clk::now();
  auto rep = jobs::run_job(jobs::job_decl("expire"), [&](jobs::JobRun& run) { jobs::expire(run, eo); }, *d->s, d->dsn,
                           clock, o);
  r.expire_s = std::chrono::duration<double>(Clk::now() - t1).count();
  if (rep.counts["qualifications_expired"] != due || rep.counts["grants_expired"] != due)
    throw std::runtime_error("expire changed the wrong rows");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  int64_t small = 20'000, large = 200'000, due = 2'000;
  bool sqlite = true, postgres = true, json = false;
  std::string pg;
  if (const char* e = std::getenv("REWARDCTL_BENCH_PG"); e && *e) pg = e;
  else if (const char* t = std::getenv("REWARDCTL_TEST_PG"); t && *t) pg = t;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--full") small = 100'000, large = 1'000'000, due = 10'000;
    else if (a == "--small" && i + 1 < argc) small = std::atoll(argv[++i]);
    else if (a == "--large" && i + 1 < argc) large = std::atoll(argv[++i]);
    else if (a == "--due" && i + 1 < argc) due = std::atoll(argv[++i]);
    else if (a == "--pg" && i + 1 < argc) pg = argv[++i];
    else if (a == "--no-pg") postgres = false;
    else if (a == "--no-sqlite") sqlite = false;
    else if (a == "-o" && i + 1 < argc) json = std::string(argv[++i]) == "json";
    else {
      std::fprintf(stderr, "usage: expire [--full] [--small N] [--large N] [--due N] [--pg CONNINFO] [--no-pg] "
                           "[--no-sqlite] [-o json]\n");
      return 64;
    }
  }
  if (due <= 0 || small < due || large < small) {
    std::fprintf(stderr, "expire: need 0 < --due <= --small <= --large\n");
    return 64;
  }
  if (postgres && pg.empty()) {
    std::fprintf(stderr, "expire: no PostgreSQL (give --pg, REWARDCTL_BENCH_PG or REWARDCTL_TEST_PG, or --no-pg)\n");
    return 64;
  }
  std::vector<std::string> backends;
  if (sqlite) backends.push_back("sqlite");
  if (postgres) backends.push_back("postgres");
  nlohmann::json out = nlohmann::json::array();
  if (!json)
    std::printf("%-9s %10s %8s %12s %12s %10s %10s\n", "backend", "table", "due", "expire s", "raw s", "vs raw",
                "large/small");
  for (auto& b : backends) {
    Row s = measure(b, pg, small, due), l = measure(b, pg, large, due);
    const double ratio = l.expire_s / s.expire_s;
    for (auto* r : {&s, &l}) {
      if (json)
        out.push_back({{"backend", b}, {"table_rows", r->rows}, {"due_rows", r->due}, {"expire_s", r->expire_s},
                       {"raw_s", r->raw_s}, {"large_over_small", ratio}});
      else
        std::printf("%-9s %10lld %8lld %12.3f %12.3f %10.2f %10s\n", b.c_str(), (long long)r->rows, (long long)r->due,
                    r->expire_s, r->raw_s, r->expire_s / r->raw_s, r == &l ? std::to_string(ratio).substr(0, 4).c_str() : "");
    }
  }
  if (json) std::printf("%s\n", out.dump().c_str());
  else
    std::printf("\ntable: grants and qualifications each; due: rows of each that expire changes. Goal: large/small "
                "<= 1.5 (cost follows the due rows). raw: two set-based UPDATEs of the same rows, rolled back.\n");
  return 0;
}
