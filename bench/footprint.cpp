// bench/footprint: what a million claims leave in the database - rows and bytes per table (heap,
// indexes and TOAST: pg_total_relation_size; SQLite: the dbstat virtual table when the library
// has it, else the file) after N delivered claims through Engine::claim (4 workers, a ledger
// prize, a budget and a per-user daily limit: the rows a common claim writes), scaled to 1,000,000.
// The figures behind docs/scaling.md. Prints a table, or with -o json one object per table.
//
//   bench/footprint [--claims N (default 100000)] [--pg CONNINFO] [--no-pg] [--no-sqlite] [-o json]
// PostgreSQL: --pg, else $REWARDCTL_BENCH_PG, else $REWARDCTL_TEST_PG.
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/activity/activity.hpp"
#include "core/engine/engine.hpp"
#include "core/store/migrate.hpp"

using namespace rc;

namespace {

const char* kDefinition =
    "code = \"bench\"\nname = \"bench\"\nkind = \"direct\"\ntimezone = \"UTC\"\n"
    "start = \"2020-01-01T00:00:00Z\"\nend = \"2099-01-01T00:00:00Z\"\nbudget_cents = 1000000000000000\n"
    "[limit]\ncount = 1\nperiod = \"day\"\n"
    "[items.coupon]\nkind = \"coupon\"\nunit_cost_cents = 100\nchannel = \"ledger\"\n"
    "[[prizes]]\ncode = \"p\"\nitem = \"coupon\"\namount = 1\nstock = 100000000\nstock_buckets = 16\n";

std::unique_ptr<store::Store> open(const std::string& url) {
  store::StoreOptions o;
  o.create_if_missing = true;
  o.retries = 50;
  o.busy_timeout_ms = 30000;
  return store::open_store(store::parse_dsn(url, "bench"), o);
}

struct Table {
  std::string name;
  int64_t rows = 0, bytes = 0;
};

std::vector<Table> measure(store::Store& st, bool pg, const std::string& path) {
  std::vector<Table> out;
  auto names = st.autocommit().query(
      pg ? "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
           "WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY c.relname"
         : "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      {});
  bool dbstat = !pg;
  for (auto& r : names.rows) {
    Table t;
    t.name = r.str(0);
    t.rows = st.autocommit().query("SELECT count(*) FROM " + t.name, {})[0].i64(0);
    if (t.rows == 0) continue;
    if (pg) {
      st.autocommit().query("ANALYZE " + t.name, {});
      t.bytes = st.autocommit().query("SELECT pg_total_relation_size(CAST($1 AS regclass))", {t.name})[0].i64(0);
    } else if (dbstat) {
      try {  // the table and its indexes
        t.bytes = st.autocommit()
                      .query("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = $1 OR name IN "
                             "(SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = $1)",
                             {t.name})[0]
                      .i64(0);
      } catch (const std::exception&) {
        dbstat = false;
      }
    }
    out.push_back(t);
  }
  if (!pg && !dbstat) {
    struct stat sb;
    if (::stat(path.c_str(), &sb) == 0) out.push_back({"(file, no dbstat)", 0, int64_t(sb.st_size)});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  std::string pg;
  if (const char* e = std::getenv("REWARDCTL_BENCH_PG")) pg = e;
  else if (const char* e2 = std::getenv("REWARDCTL_TEST_PG")) pg = e2;
  bool do_pg = true, do_sqlite = true, json = false;
  int64_t claims = 100000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--claims" && i + 1 < argc) claims = std::atoll(argv[++i]);
    else if (a == "--pg" && i + 1 < argc) pg = argv[++i];
    else if (a == "--no-pg") do_pg = false;
    else if (a == "--no-sqlite") do_sqlite = false;
    else if (a == "-o" && i + 1 < argc) json = std::string(argv[++i]) == "json";
    else {
      std::fprintf(stderr, "usage: footprint [--claims N] [--pg CONNINFO] [--no-pg] [--no-sqlite] [-o json]\n");
      return 64;
    }
  }
  if (claims < 1) return 64;
  if (do_pg && pg.empty()) {
    std::fprintf(stderr, "footprint: no PostgreSQL (give --pg, REWARDCTL_BENCH_PG or REWARDCTL_TEST_PG, or --no-pg)\n");
    return 69;
  }
  std::vector<std::string> backends;
  if (do_sqlite) backends.push_back("sqlite");
  if (do_pg) backends.push_back("postgres");
  const double scale = 1e6 / double(claims);
  for (const auto& b : backends) {
    std::string url, schema, path;
    if (b == "sqlite") {
      path = "/tmp/rcbench_footprint_" + std::to_string(getpid()) + ".db";
      url = "sqlite:" + path;
    } else {
      schema = "bench_fp_" + std::to_string(getpid());
      auto s = store::open_postgres(pg, {});
      s->exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
      s->exec("CREATE SCHEMA " + schema);
      url = pg + " options='-c search_path=" + schema + "'";
    }
    {
      auto st = open(url);
      store::migrate(*st, 0);
      auto parsed = activity::parse_definition(kDefinition, "bench");
      if (!parsed.def) throw std::runtime_error("bench definition does not parse");
      activity::create(*st, *parsed.def, kDefinition, {true, false}, {"bench", false}, 0);
    }
    std::atomic<int64_t> next{0}, granted{0};
    std::vector<std::thread> ts;
    SystemClock clock;
    for (int w = 0; w < 4; ++w)
      ts.emplace_back([&] {
        auto st = open(url);
        engine::EngineOptions o;
        o.actor = "bench";
        engine::Engine eng(*st, clock, o);
        for (int64_t i; (i = next++) < claims;) {
          engine::ClaimRequest r;
          r.activity = "bench";
          r.user = "user_" + std::to_string(i);
          r.biz_id = "order_" + std::to_string(i);
          r.deliver = true;
          if (eng.claim(r).status == engine::Status::granted) ++granted;
        }
      });
    for (auto& t : ts) t.join();
    auto st = open(url);
    auto tables = measure(*st, b == "postgres", path);
    int64_t rows = 0, bytes = 0;
    if (!json) {
      std::printf("%s: %lld claims granted and delivered; per 1,000,000 claims:\n", b.c_str(), (long long)granted.load());
      std::printf("  %-22s %14s %12s %14s\n", "table", "rows", "MiB", "bytes/claim");
    }
    for (auto& t : tables) {
      rows += t.rows;
      bytes += t.bytes;
      if (json)
        std::printf("{\"v\":1,\"backend\":\"%s\",\"claims\":%lld,\"table\":\"%s\",\"rows_per_million\":%.0f,"
                    "\"bytes_per_million\":%.0f,\"bytes_per_claim\":%.1f}\n",
                    b.c_str(), (long long)granted.load(), t.name.c_str(), double(t.rows) * scale,
                    double(t.bytes) * scale, double(t.bytes) / double(claims));
      else
        std::printf("  %-22s %14.0f %12.1f %14.1f\n", t.name.c_str(), double(t.rows) * scale,
                    double(t.bytes) * scale / 1048576.0, double(t.bytes) / double(claims));
    }
    if (!json)
      std::printf("  %-22s %14.0f %12.1f %14.1f\n\n", "total", double(rows) * scale, double(bytes) * scale / 1048576.0,
                  double(bytes) / double(claims));
    st.reset();
    if (b == "postgres") store::open_postgres(pg, {})->exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
    else
      for (auto suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
  }
  return 0;
}
