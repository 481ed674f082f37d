// bench/reconcile: a full reconcile over N grants (with their delivery bills, ledger entries, ledger
// accounts, limit counters and status-log rows) against the database's own GROUP BY aggregates over
// the same tables, measured in the same run (DESIGN §8: reconcile <= 3x a raw GROUP BY).
//
//   build/bench/reconcile [--grants N] [--repeat K] [--backend sqlite|postgres|both] [--pg CONNINFO] [--checks] [--keep]
//                         [--reuse SCHEMA]
//
// Defaults: 1,000,000 grants, best of 2 (runs interleaved: only ratios within one invocation mean
// anything on these shared machines). --checks prints each check's time; --keep keeps the database;
// --reuse SCHEMA (PostgreSQL) measures a schema an earlier --keep kept, as it is, without building.
// The rows are generated inside the database with set-based INSERT ... SELECT over a number series
// (generate_series / a recursive CTE), so building 1M grants takes seconds, not minutes. The data are
// consistent, and the bench fails when reconcile finds any difference in them.
// PostgreSQL: --pg, else $REWARDCTL_BENCH_PG, else $REWARDCTL_TEST_PG. Each result prints the server
// line its figures depend on (version, shared_buffers, data size). Give the server a cache that holds
// the data (about 1.3 GB at 1M grants), as a database serving such a reconcile would have; e.g. a
// throwaway server: PG_TMP_OPTS='-c shared_buffers=1GB' with scripts/pgtmp.sh (its default 128MB
// makes every index-ordered pass read through the OS cache).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/activity/activity.hpp"
#include "core/activity/definition.hpp"
#include "core/store/migrate.hpp"
#include "core/store/store.hpp"
#include "jobs/reconcile/reconcile.hpp"

namespace {

using namespace rc;
namespace rec = jobs::reconcile;

constexpr int kPrizes = 10;

std::string definition(int64_t grants) {
  std::string t =
      "code = \"bench\"\nname = \"reconcile bench\"\nkind = \"direct\"\ntimezone = \"UTC\"\n"
      "start = \"2020-01-01T00:00:00Z\"\nend = \"2099-01-01T00:00:00Z\"\nbudget_cents = " +
      std::to_string(grants * 100 * 2) +
      "\n[limit]\ncount = 1000\nperiod = \"total\"\n"
      "[items.thing]\nkind = \"coupon\"\nunit_cost_cents = 100\nchannel = \"ledger\"\n";
  for (int p = 0; p < kPrizes; ++p)
    t += "[[prizes]]\ncode = \"p" + std::to_string(p) + "\"\nitem = \"thing\"\namount = 1\nstock = " +
         std::to_string(grants / kPrizes * 2) + "\n";
  return t;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Target {
  std::string name, url, schema;
};

std::unique_ptr<store::Store> open(const Target& t) {
  return store::open_store(store::parse_dsn(t.url, "bench"), {});
}

// Fills a fresh database: 1 activity, 10 prizes, N grants (1% reversed), 3-4 status-log rows, a
// delivery bill and 1-2 ledger entries per grant, N/5 users with their ledger account and counter.
void generate(store::Store& s, int64_t n) {
  auto parsed = activity::parse_definition(definition(n), "bench");
  if (!parsed.def) throw std::runtime_error("bench definition does not parse");
  activity::create(s, *parsed.def, definition(n), {true, false}, {"bench", false}, 0);
  const int64_t aid = s.query("SELECT id FROM activity WHERE code = 'bench'")[0].i64(0);
  const int64_t p0 = s.query("SELECT min(id) FROM prize WHERE activity_id = $1", {aid})[0].i64(0);
  const std::string series =
      s.dialect() == store::Dialect::postgres
          ? "WITH s(i) AS (SELECT generate_series(1, " + std::to_string(n) + ")) "
          : "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < " + std::to_string(n) + ") ";
  const std::string users = std::to_string(std::max<int64_t>(1, n / 5));
  // The secondary indexes of the bulk-loaded tables are dropped and made again after the load (one
  // sort each instead of millions of inserts), from their own definitions in the catalog; the
  // indexes behind unique constraints stay.
  const bool pg = s.dialect() == store::Dialect::postgres;
  auto defs = s.query(pg ? "SELECT indexname, indexdef FROM pg_indexes i WHERE schemaname = current_schema() AND "
                           "tablename IN ('grants', 'status_log', 'delivery_bill', 'ledger_entry') AND NOT EXISTS "
                           "(SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)"
                         : "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND "
                           "tbl_name IN ('grants', 'status_log', 'delivery_bill', 'ledger_entry')");
  s.transact(store::TxMode::write, [&](store::Tx& tx) {
    for (auto& d : defs.rows) tx.exec("DROP INDEX " + d.str(0));
    // (PostgreSQL: the foreign keys' per-row triggers are skipped for the load, as a restore does;
    // the rows are consistent by construction and reconcile proves it below)
    if (pg) tx.exec_script("SET LOCAL session_replication_role = replica");
    tx.exec(series +
                "INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state, "
                "bucket, bill_no, channel, created_at, updated_at) "
                "SELECT 'R' || (1000000000 + i), 'Z' || (1000000000 + i), $1, $2 + i % " + std::to_string(kPrizes) + ", 'u' || (i % " + users +
                "), 1, 100, CASE WHEN i % 100 = 0 THEN 'reversed' ELSE 'success' END, 0, 'B' || (1000000000 + i), 'ledger', "
                "1600000000000 + i, 1600000000000 + i FROM s",
            {aid, p0});
    // the chain of every grant, one pass per step so that ids ascend along each chain
    const char* steps[][3] = {{"NULL", "'init'", ""},
                              {"'init'", "'issuing'", ""},
                              {"'issuing'", "'success'", ""},
                              {"'success'", "'reversed'", " WHERE state = 'reversed'"}};
    for (auto& st : steps)
      tx.exec(std::string("INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, created_at) "
                          "SELECT 'grant', id, ") +
              st[0] + ", " + st[1] + ", 'bench', created_at FROM grants" + st[2] + " ORDER BY id");
    tx.exec(
        "INSERT INTO delivery_bill (bill_no, grant_id, channel, amount, state, attempts, created_at, updated_at) "
        "SELECT bill_no, id, 'ledger', amount, 'success', 1, created_at, updated_at FROM grants ORDER BY id");
    tx.exec(
        "INSERT INTO ledger_entry (bill_no, kind, user_id, asset, amount, created_at) "
        "SELECT bill_no, 'credit', user_id, 'coupon:thing', amount, created_at FROM grants ORDER BY id");
    tx.exec(
        "INSERT INTO ledger_entry (bill_no, kind, user_id, asset, amount, created_at) "
        "SELECT bill_no, 'reverse', user_id, 'coupon:thing', -amount, created_at FROM grants WHERE state = 'reversed' "
        "ORDER BY id");
    tx.exec(
        "INSERT INTO ledger_account (user_id, asset, balance, updated_at) "
        "SELECT user_id, asset, sum(amount), 0 FROM ledger_entry GROUP BY user_id, asset");
    tx.exec(
        "INSERT INTO limit_counter (scope, user_id, period_key, used, updated_at) "
        "SELECT 'a:' || activity_id, user_id, 'total', count(*), 0 FROM grants WHERE state = 'success' "
        "GROUP BY activity_id, user_id");
    auto held = tx.query("SELECT prize_id, count(*) FROM grants WHERE state = 'success' GROUP BY prize_id");
    for (auto& r : held.rows)
      tx.exec("UPDATE stock SET remain = total - $2 WHERE prize_id = $1", {r.i64(0), r.i64(1)});
    tx.exec("UPDATE budget SET consumed_cents = (SELECT sum(cost_cents) FROM grants WHERE state = 'success')");
    for (auto& d : defs.rows) tx.exec(d.str(1));
  });
  // What a live database has had done to it meanwhile: statistics; on PostgreSQL autovacuum's
  // visibility map (an index-only scan then skips the table); on SQLite the checkpoint of the write-
  // ahead log (the load's one big transaction is still in it; a live database checkpoints every 1000
  // pages).
  s.autocommit().exec_script(pg ? "VACUUM (ANALYZE) grants, status_log, delivery_bill, ledger_entry, ledger_account, "
                                   "limit_counter, stock, budget, prize, activity"
                                 : "ANALYZE; PRAGMA wal_checkpoint(TRUNCATE)");
}

// The database's own aggregates: what a hand-written report over the same tables costs.
const std::vector<std::pair<std::string, std::string>> kRaw = {
    {"grants", "SELECT activity_id, prize_id, state, count(*), sum(cost_cents) FROM grants "
               "GROUP BY activity_id, prize_id, state"},
    {"status_log", "SELECT entity, to_state, count(*) FROM status_log GROUP BY entity, to_state"},
    {"ledger_entry", "SELECT kind, asset, count(*), sum(amount) FROM ledger_entry GROUP BY kind, asset"},
    {"delivery_bill", "SELECT state, count(*), sum(amount) FROM delivery_bill GROUP BY state"},
    {"ledger_account", "SELECT asset, count(*), sum(balance) FROM ledger_account GROUP BY asset"},
    {"limit_counter", "SELECT scope, count(*), sum(used) FROM limit_counter GROUP BY scope"},
};

struct Times {
  double grants_agg = 1e9, all_agg = 1e9, reconcile = 1e9, exact = 1e9;
  std::map<std::string, double> per_agg;                   // best of the runs, per table
  std::vector<std::pair<std::string, double>> per_check;  // of the best reconcile
};

void measure(store::Store& s, Times& t) {
  double all = 0;
  for (auto& [table, sql] : kRaw) {
    auto t0 = std::chrono::steady_clock::now();
    // (with the reconcile's own session settings: the same memory, the same planner)
    s.transact(store::TxMode::read, [&](store::Tx& tx) {
      rec::tune_read(tx);
      tx.query(sql);
    });
    double d = since(t0);
    all += d;
    auto it = t.per_agg.find(table);
    if (it == t.per_agg.end() || d < it->second) t.per_agg[table] = d;
    if (table == "grants") t.grants_agg = std::min(t.grants_agg, d);
  }
  t.all_agg = std::min(t.all_agg, all);
  rec::Options o;
  std::vector<std::pair<std::string, double>> per;
  std::vector<std::string> proven;
  auto t0 = std::chrono::steady_clock::now();
  auto diffs = rec::find_diffs(s, o, 1600000000000 + 10'000'000'000, &per, nullptr, &proven);
  double d = since(t0);
  size_t fingerprinted = 0;
  for (auto& c : rec::checks()) fingerprinted += c.fingerprints;
  if (diffs.empty() && rec::uses_fingerprints(s.autocommit(), o) && proven.size() != fingerprinted) {
    std::fprintf(stderr, "reconcile: the fingerprints of %zu of %zu checks differ on the generated (clean) books\n",
                 fingerprinted - proven.size(), fingerprinted);
    std::exit(1);
  }
  // the same run with every check's full queries (reconcile --exact), as a cron run would never do
  // on clean books but a run that finds damage does for the checks concerned
  o.exact = true;
  auto e0 = std::chrono::steady_clock::now();
  if (!rec::find_diffs(s, o, 1600000000000 + 10'000'000'000).empty()) {
    std::fprintf(stderr, "reconcile: --exact finds differences in the generated books\n");
    std::exit(1);
  }
  t.exact = std::min(t.exact, since(e0));
  if (!diffs.empty()) {
    std::fprintf(stderr, "reconcile: the generated books are not clean (%zu diffs), first: %s %s %s %s/%s\n",
                 diffs.size(), diffs[0].check.c_str(), diffs[0].entity.c_str(), diffs[0].key.c_str(),
                 diffs[0].expected.c_str(), diffs[0].actual.c_str());
    std::exit(1);
  }
  if (d < t.reconcile) {
    t.reconcile = d;
    t.per_check = per;
  }
}

struct Result {
  std::string backend;
  int64_t grants = 0, log_rows = 0, entries = 0;
  double build = 0;
  std::string server;  // what the figures depend on: version, cache, size of the data
  Times t;
};

// The server settings the figures depend on, and the size of the data set. The checks and the
// aggregates both run with reconcile's own session settings (rec::tune_read: work_mem, no JIT);
// the cache is the server's: with shared_buffers smaller than the tables (PostgreSQL's default
// 128MB against about 1.3 GB at 1M grants) every index-ordered pass of a check reads through the
// OS cache while the aggregates' sequential scans use a small ring, and the ratio measures that.
std::string server_of(store::Store& s) {
  if (s.dialect() == store::Dialect::postgres) {
    auto r = s.query(
        "SELECT current_setting('server_version'), current_setting('shared_buffers'), "
        "pg_size_pretty(sum(pg_total_relation_size(c.oid))), current_setting('max_parallel_workers_per_gather') "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND "
        "c.relkind = 'r'");
    return "PostgreSQL " + r[0].str(0) + ", shared_buffers " + r[0].str(1) + ", data " + r[0].str(2) +
           ", checks and aggregates with work_mem 256MB, jit off; checks on " +
           std::to_string(rec::connections_for(s.autocommit(), {}, rec::checks().size())) +
           " connection(s), aggregates with up to " + r[0].str(3) + " parallel worker(s)";
  }
  auto r = s.query("SELECT sqlite_version(), (SELECT page_count * page_size FROM pragma_page_count, pragma_page_size)");
  return "SQLite " + r[0].str(0) + ", data " + std::to_string(r[0].i64(1) >> 20) + " MB, cache 256 MB";
}

std::string json_of(const std::vector<Result>& rs) {
  std::string j = "{\"bench\":\"reconcile\",\"goal_ratio\":3,\"results\":[";
  char buf[256];
  for (size_t i = 0; i < rs.size(); ++i) {
    auto& r = rs[i];
    std::snprintf(buf, sizeof buf,
                  "%s{\"backend\":\"%s\",\"grants\":%lld,\"status_log_rows\":%lld,\"ledger_entries\":%lld,"
                  "\"build_s\":%.3f,\"reconcile_s\":%.4f,\"exact_s\":%.4f,\"grants_agg_s\":%.4f,\"all_aggs_s\":%.4f,",
                  i ? "," : "", r.backend.c_str(), (long long)r.grants, (long long)r.log_rows, (long long)r.entries,
                  r.build, r.t.reconcile, r.t.exact, r.t.grants_agg, r.t.all_agg);
    j += buf;
    j += "\"server\":\"" + r.server + "\",";
    std::snprintf(buf, sizeof buf,
                  "\"ratio_grants_agg\":%.3f,\"ratio_all_aggs\":%.3f,\"ratio_exact_all_aggs\":%.3f,\"checks\":{",
                  r.t.reconcile / r.t.grants_agg, r.t.reconcile / r.t.all_agg, r.t.exact / r.t.all_agg);
    j += buf;
    for (size_t k = 0; k < r.t.per_check.size(); ++k) {
      std::snprintf(buf, sizeof buf, "%s\"%s\":%.4f", k ? "," : "", r.t.per_check[k].first.c_str(),
                    r.t.per_check[k].second);
      j += buf;
    }
    j += "},\"aggregates\":{";
    size_t k = 0;
    for (auto& [name, sec] : r.t.per_agg) {
      std::snprintf(buf, sizeof buf, "%s\"%s\":%.4f", k++ ? "," : "", name.c_str(), sec);
      j += buf;
    }
    j += "}}";
  }
  return j + "]}";
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(std::getenv("REWARDCTL_BENCH_SQL") ? spdlog::level::trace : spdlog::level::warn);
  std::string pg;
  if (const char* e = std::getenv("REWARDCTL_BENCH_PG")) pg = e;
  else if (const char* e2 = std::getenv("REWARDCTL_TEST_PG")) pg = e2;
  int64_t n = 1'000'000;
  int repeat = 2;
  bool do_sqlite = true, do_pg = true, per_check = false, keep = false, json = false;
  std::string reuse;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--grants" && i + 1 < argc) n = std::atoll(argv[++i]);
    else if (a == "--repeat" && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    else if (a == "--pg" && i + 1 < argc) pg = argv[++i];
    else if (a == "--checks") per_check = true;
    else if (a == "--keep") keep = true;
    else if (a == "--reuse" && i + 1 < argc) reuse = argv[++i];
    else if (a == "-o" && i + 1 < argc && std::string(argv[i + 1]) == "json") json = (++i, true);
    else if (a == "-o" && i + 1 < argc && std::string(argv[i + 1]) == "table") json = (++i, false);
    else if (a == "--backend" && i + 1 < argc) {
      std::string b = argv[++i];
      do_sqlite = b == "sqlite" || b == "both";
      do_pg = b == "postgres" || b == "both";
    } else {
      std::fprintf(stderr,
                   "usage: reconcile [--grants N] [--repeat K] [--backend sqlite|postgres|both] [--pg CONNINFO] "
                   "[--checks] [--keep] [--reuse SCHEMA] [-o table|json]\n");
      return 64;
    }
  }
  if (n < 100) n = 100;
  if (do_pg && pg.empty()) {
    std::fprintf(stderr, "reconcile: no PostgreSQL (give --pg, REWARDCTL_BENCH_PG or REWARDCTL_TEST_PG, or --backend sqlite)\n");
    return 69;
  }
  std::vector<Target> targets;
  if (do_sqlite) {
    std::string path = "/tmp/rcbench_reconcile_" + std::to_string(getpid()) + ".db";
    targets.push_back({"sqlite", "sqlite:" + path, ""});
  }
  if (do_pg) {
    std::string schema = reuse.empty() ? "bench_rec_" + std::to_string(getpid()) : reuse;
    if (schema.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
      std::fprintf(stderr, "reconcile: --reuse: '%s' is not a schema name this bench makes\n", schema.c_str());
      return 64;
    }
    targets.push_back({"postgres", pg + " options='-c search_path=" + schema + "'", schema});
  }
  if (!json)
    std::printf("%-9s %9s %9s %11s %12s %11s %12s %13s %9s %15s\n", "backend", "grants", "build s", "reconcile s",
                "grants agg s", "all aggs s", "rec/grants", "rec/all aggs", "exact s", "exact/all aggs");
  std::vector<Result> results;
  for (auto& t : targets) {
    const bool reused = t.name == "postgres" && !reuse.empty();
    if (reused) {
      // (measured as it is: the schema a --keep left)
    } else if (t.name == "postgres") {
      auto admin = store::open_postgres(pg, {});
      admin->exec("DROP SCHEMA IF EXISTS " + t.schema + " CASCADE");
      admin->exec("CREATE SCHEMA " + t.schema);
    } else {
      store::StoreOptions o;
      o.create_if_missing = true;
      store::open_store(store::parse_dsn(t.url, "bench"), o);
    }
    auto s = open(t);
    if (reused && s->query("SELECT CASE WHEN to_regclass('grants') IS NULL THEN 1 ELSE 0 END")[0].i64(0)) {
      std::fprintf(stderr, "reconcile: --reuse: no bench schema '%s' (an earlier --keep prints one)\n", t.schema.c_str());
      return 66;
    }
    Result r;
    r.backend = t.name;
    if (!reused) {
      store::migrate(*s, 0);
      auto t0 = std::chrono::steady_clock::now();
      generate(*s, n);
      r.build = since(t0);
    }
    r.grants = s->query("SELECT count(*) FROM grants")[0].i64(0);
    r.log_rows = s->query("SELECT count(*) FROM status_log")[0].i64(0);
    r.entries = s->query("SELECT count(*) FROM ledger_entry")[0].i64(0);
    r.server = server_of(*s);
    for (int k = 0; k < repeat; ++k) measure(*s, r.t);
    auto& tm = r.t;
    if (!json) {
      std::printf("%-9s %9lld %9.1f %11.3f %12.3f %11.3f %12.2f %13.2f %9.3f %15.2f\n", t.name.c_str(),
                  (long long)r.grants, r.build, tm.reconcile, tm.grants_agg, tm.all_agg, tm.reconcile / tm.grants_agg,
                  tm.reconcile / tm.all_agg, tm.exact, tm.exact / tm.all_agg);
      std::printf("    %s\n", r.server.c_str());
      if (per_check) {
        for (auto& [name, sec] : tm.per_check) std::printf("    check %-16s %8.3f s\n", name.c_str(), sec);
        for (auto& [name, sec] : tm.per_agg) std::printf("    agg   %-16s %8.3f s\n", name.c_str(), sec);
      }
    }
    std::fflush(stdout);
    results.push_back(r);
    s.reset();
    if (keep || reused) {
      if (!json) std::printf("    kept: %s\n", t.url.c_str());
      continue;
    }
    if (t.name == "postgres") store::open_postgres(pg, {})->exec("DROP SCHEMA IF EXISTS " + t.schema + " CASCADE");
    else {
      std::string path = t.url.substr(7);
      for (const char* suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
    }
  }
  if (json) {
    std::printf("%s\n", json_of(results).c_str());
    return 0;
  }
  std::printf("\nreconcile: every check (stock, budget, ledger, qualifications, limits, stuck, status_log,\n"
              "list_items) on one snapshot. grants agg: SELECT activity, prize, state, count(*), sum(cost) FROM grants GROUP BY ...\n"
              "all aggs: that plus one GROUP BY over each other table reconcile reads (status_log, ledger_entry,\n"
              "delivery_bill, ledger_account, limit_counter). Goal (DESIGN 8): reconcile <= 3 x all aggs.\n"
              "PostgreSQL's reconcile proves ledger, limits and status_log by their fingerprints (hash sums of both\n"
              "sides, no join); exact: the same run with every check's full queries (reconcile --exact).\n"
              "Best of --repeat runs, reconcile and aggregates interleaved in the same process.\n");
  return 0;
}
