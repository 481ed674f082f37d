// bench/claim: claims per second of rewardctl's full claim flow (Engine::claim) against what the
// storage engine itself can do, measured in the same run, on SQLite and PostgreSQL, at 1, 4 and 16
// workers, on one hot prize and spread over 16 stock buckets. Two baselines:
//   raw: the minimal two-statement claim (UPDATE stock ... WHERE remain > 0, INSERT with a unique
//        biz_id, COMMIT) - what "no oversell, one grant per biz_id" costs at the very least;
//   raw equivalent: every row a delivered ledger claim writes (limit counter, grant, its status-log
//        rows, budget, stock, bill, ledger entry and account), written by hand with prepared
//        statements in one transaction - the minimum the database must do for what core+ledger does.
// The activity has a budget and a per-user daily limit, so the core writes the same rows. Prints a
// table, or with -o json one JSON object per cell; the ratios are what to compare between runs
// (absolute figures depend on the machine).
//
//   bench/claim [--seconds S] [--pg CONNINFO] [--no-pg] [--no-sqlite] [--workers 1,4,16] [--ladder] [--pg-stats]
//               [-o json]
// --pg-stats: on PostgreSQL, also what pg_stat_statements says the server ran per claim in the
// core+ledger and raw-equiv cells (statements - each one round trip, as both send one statement per
// call, BEGIN and COMMIT included - and execution time, lock waits included), with the
// heaviest statements; the server must preload pg_stat_statements (the bench creates the extension).
// --ladder: instead, the cost of the budget ladder - the same claims on an activity with a budget,
// without and with a ladder (thresholds never reached), 16 stock buckets; ratio ladder / budget.
// --kinds: instead, lottery and red packet claims delivered through the ledger, by the one
// statement (PostgreSQL, rewardctl_claim_one) and by the full flow (one_statement_claims = false),
// alternated in short rounds on one activity; ratio one statement / full flow. With --pg-stats,
// also statements and server time per claim for each. SQLite has no statement: not measured there.
// PostgreSQL: --pg, else $REWARDCTL_BENCH_PG, else $REWARDCTL_TEST_PG (or start one with scripts/pgtmp.sh).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "core/activity/activity.hpp"
#include "core/engine/engine.hpp"
#include "core/store/migrate.hpp"
#include "raw_ledger.hpp"

using namespace rc;
using Clk = std::chrono::steady_clock;

namespace {

struct Target {
  std::string name;  // sqlite | postgres
  std::string url;   // for workers
  std::string schema;
  int64_t activity_id = 0, prize_id = 0;  // the bench activity's, for the raw equivalent
};

double g_seconds = 3.0;
int64_t g_last_done = 0;  // the successes of the last measure()

constexpr int64_t kBudgetCents = 1000000000000000;

// budget: "" (none), "plain" (a budget never exhausted), "ladder" (the same with a budget ladder),
// "limited" (a budget and a per-user daily limit: the main table's activity)
std::string definition(int buckets, const std::string& budget = "") {
  return "code = \"bench\"\nname = \"bench\"\nkind = \"direct\"\ntimezone = \"UTC\"\n"
         "start = \"2020-01-01T00:00:00Z\"\nend = \"2099-01-01T00:00:00Z\"\n" +
         std::string(budget.empty() ? "" : "budget_cents = " + std::to_string(kBudgetCents) + "\n") +
         (budget == "ladder" ? "[budget]\nwarn_at = 0.8\ndegrade_at = 0.9\nstop_at = 1.0\n" : "") +
         (budget == "limited" ? "[limit]\ncount = 1\nperiod = \"day\"\n" : "") +
         "[items.coupon]\nkind = \"coupon\"\nunit_cost_cents = 100\nchannel = \"ledger\"\n"
         "[[prizes]]\ncode = \"p\"\nitem = \"coupon\"\namount = 1\nstock = 100000000\nstock_buckets = " +
         std::to_string(buckets) + "\n";
}

// --kinds: a lottery (three prizes by weight, a consolation) or a red packet (100..300 cents), each
// with a budget never exhausted and a per-user daily limit, 16 stock buckets per prize.
std::string kind_definition(const std::string& kind) {
  std::string t = "code = \"bench\"\nname = \"bench\"\nkind = \"" + kind +
                  "\"\ntimezone = \"UTC\"\nstart = \"2020-01-01T00:00:00Z\"\nend = \"2099-01-01T00:00:00Z\"\n"
                  "budget_cents = " + std::to_string(kBudgetCents) + "\n[limit]\ncount = 1\nperiod = \"day\"\n";
  if (kind == "lottery")
    return t + "[items.coupon]\nkind = \"coupon\"\nunit_cost_cents = 100\nchannel = \"ledger\"\n"
               "[[prizes]]\ncode = \"gold\"\nitem = \"coupon\"\namount = 5\nstock = 100000000\nstock_buckets = 16\nweight = 1\n"
               "[[prizes]]\ncode = \"silver\"\nitem = \"coupon\"\namount = 2\nstock = 100000000\nstock_buckets = 16\nweight = 3\n"
               "[[prizes]]\ncode = \"thanks\"\nitem = \"coupon\"\namount = 1\nstock = 100000000\nstock_buckets = 16\nweight = 6\n"
               "[lottery]\nconsolation = \"thanks\"\n";
  return t + "[items.cash]\nkind = \"cash\"\nunit_cost_cents = 1\nchannel = \"ledger\"\n"
             "[[prizes]]\ncode = \"packet\"\nitem = \"cash\"\namount_min = 100\namount_max = 300\nstock = 100000000\n"
             "stock_buckets = 16\n";
}

std::unique_ptr<store::Store> open(const Target& t) {
  store::StoreOptions o;
  o.create_if_missing = true;
  o.retries = 50;
  o.busy_timeout_ms = 30000;
  return store::open_store(store::parse_dsn(t.url, "bench"), o);
}

// A fresh database (SQLite file / PostgreSQL schema) with the activity and a raw table.
Target fresh(const std::string& backend, const std::string& pg, int buckets, int run, const std::string& budget = "",
             const std::string& kind = "direct") {
  Target t;
  t.name = backend;
  if (backend == "sqlite") {
    std::string dir = "/tmp/rcbench_" + std::to_string(getpid());
    std::string cmd = "mkdir -p " + dir;
    (void)!system(cmd.c_str());
    std::string path = dir + "/b" + std::to_string(run) + ".db";
    unlink(path.c_str());
    unlink((path + "-wal").c_str());
    unlink((path + "-shm").c_str());
    t.url = "sqlite:" + path;
  } else {
    t.schema = "bench_" + std::to_string(getpid()) + "_" + std::to_string(run);
    auto s = store::open_postgres(pg, {});
    s->exec("DROP SCHEMA IF EXISTS " + t.schema + " CASCADE");
    s->exec("CREATE SCHEMA " + t.schema);
    t.url = pg + " options='-c search_path=" + t.schema + "'";
  }
  auto s = open(t);
  store::migrate(*s, 0);
  const std::string text = kind == "direct" ? definition(buckets, budget) : kind_definition(kind);
  auto parsed = activity::parse_definition(text, "bench");
  if (!parsed.def) throw std::runtime_error("bench definition does not parse");
  activity::create(*s, *parsed.def, text, {true, false}, {"bench", false}, 0);
  // The raw claim's own tables: one stock row per bucket, and claims with a unique biz_id.
  s->transact(store::TxMode::write, [&](store::Tx& tx) {
    tx.exec_script(
        "CREATE TABLE raw_stock (bucket INTEGER PRIMARY KEY, remain BIGINT NOT NULL);"
        "CREATE TABLE raw_claim (id " +
        std::string(backend == "sqlite" ? "INTEGER PRIMARY KEY" : "BIGSERIAL PRIMARY KEY") +
        ", biz_id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL, bucket INTEGER NOT NULL, created_at BIGINT NOT NULL)");
    for (int b = 0; b < 16; ++b) tx.exec("INSERT INTO raw_stock (bucket, remain) VALUES ($1, 100000000)", {int64_t(b)});
  });
  auto ids = s->autocommit().query("SELECT a.id, p.id FROM activity a JOIN prize p ON p.activity_id = a.id", {});
  t.activity_id = ids[0].i64(0);
  t.prize_id = ids[0].i64(1);
  return t;
}

void drop(const Target& t, const std::string& pg) {
  if (t.name == "postgres") store::open_postgres(pg, {})->exec("DROP SCHEMA IF EXISTS " + t.schema + " CASCADE");
}

// Runs `workers` threads for g_seconds; each calls op(worker, i) and counts successes.
template <class Setup>
double measure(int workers, Setup setup) {
  std::atomic<bool> go{false}, stop{false};
  std::atomic<int64_t> done{0}, ready{0};
  std::vector<std::thread> ts;
  std::atomic<int> errors{0};
  for (int w = 0; w < workers; ++w)
    ts.emplace_back([&, w] {
      auto op = setup(w);
      ++ready;
      while (!go) std::this_thread::yield();
      int64_t n = 0;
      for (int64_t i = 0; !stop; ++i) {
        try {
          if (op(i)) ++n;
        } catch (const std::exception& e) {
          if (errors++ < 3) std::fprintf(stderr, "bench worker error: %s\n", e.what());
        }
      }
      done += n;
    });
  while (ready < workers) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto t0 = Clk::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(g_seconds));
  stop = true;
  for (auto& t : ts) t.join();
  double secs = std::chrono::duration<double>(Clk::now() - t0).count();
  g_last_done = done;
  return double(done) / secs;
}

double run_core(const Target& t, int workers, bool deliver, bool one_statement = true) {
  SystemClock clock;
  static int calls = 0;  // every measurement claims with biz ids of its own: a reused one is a replay
  const std::string call = std::to_string(calls++);
  return measure(workers, [&](int w) {
    auto st = std::shared_ptr<store::Store>(open(t));
    engine::EngineOptions o;
    o.actor = "bench";
    o.one_statement_claims = one_statement;
    auto eng = std::make_shared<engine::Engine>(*st, clock, o);
    std::string prefix = "w" + std::to_string(w) + "_" + std::to_string(deliver) + "_" + call + "_";
    return [st, eng, prefix, deliver](int64_t i) {
      engine::ClaimRequest r;
      r.activity = "bench";
      r.user = prefix + std::to_string(i);
      r.biz_id = r.user;
      r.deliver = deliver;
      return eng->claim(r).status == engine::Status::granted;
    };
  });
}

double run_raw(const Target& t, int workers, bool spread) {
  return measure(workers, [&](int w) {
    auto st = std::shared_ptr<store::Store>(open(t));
    std::string prefix = "r" + std::to_string(w) + "_";
    int64_t bucket = spread ? w % 16 : 0;
    return [st, prefix, bucket](int64_t i) {
      bool ok = false;
      std::string biz = prefix + std::to_string(i);
      st->transact(store::TxMode::write, [&](store::Tx& tx) {
        ok = tx.exec("UPDATE raw_stock SET remain = remain - 1 WHERE bucket = $1 AND remain > 0", {bucket}) == 1;
        if (!ok) return tx.rollback_only();
        tx.exec("INSERT INTO raw_claim (biz_id, user_id, bucket, created_at) VALUES ($1, $1, $2, $3)", {biz, bucket, i});
      });
      return ok;
    };
  });
}

// The raw equivalent of a delivered ledger claim: the rows Engine::claim with the ledger channel
// writes, in the order it writes them, by hand-written prepared statements in one transaction, with
// no reads and no checks beyond the conditional updates that keep the invariants (limit, budget,
// stock). Grant and bill go straight to their final state; both status-log rows in one statement.
double run_raw_equivalent(const Target& t, int workers, bool spread) {
  return measure(workers, [&](int w) {
    auto st = std::shared_ptr<store::Store>(open(t));
    std::string prefix = "q" + std::to_string(w) + "_";
    int64_t bucket = spread ? w % 16 : 0;
    const Target tt = t;
    return [st, prefix, bucket, tt](int64_t i) {
      bool ok = false;
      const std::string user = prefix + std::to_string(i);
      const std::string bill = "B" + user, scope = "a:" + std::to_string(tt.activity_id);
      st->transact(store::TxMode::write, [&](store::Tx& tx) {
        ok = tx.exec("INSERT INTO limit_counter (scope, user_id, period_key, used, updated_at) VALUES ($1, $2, "
                     "'2026-12-01', 1, $3) ON CONFLICT (scope, user_id, period_key) DO UPDATE SET used = "
                     "limit_counter.used + 1, updated_at = excluded.updated_at WHERE limit_counter.used < 1",
                     {scope, user, i}) == 1;
        if (!ok) return tx.rollback_only();
        auto g = tx.query(
            "INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state, bucket, "
            "pool_version, channel, bill_no, created_at, updated_at) VALUES ($1, $2, $3, $4, $2, 1, 100, 'success', $5, 1, "
            "'ledger', $6, $7, $7) ON CONFLICT (biz_id) DO NOTHING RETURNING id",
            {"R" + user, user, tt.activity_id, tt.prize_id, bucket, bill, i});
        ok = !g.empty();
        if (!ok) return tx.rollback_only();
        const int64_t id = g[0].i64(0);
        tx.exec("INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, created_at) VALUES "
                "('grant', $1, NULL, 'init', 'bench', 'claim', $2), ('grant', $1, 'init', 'success', 'bench', "
                "'ledger credited', $2)",
                {id, i});
        ok = tx.exec("UPDATE budget SET consumed_cents = consumed_cents + 100 WHERE activity_id = $1 AND "
                     "consumed_cents <= authorised_cents - 100",
                     {tt.activity_id}) == 1 &&
             tx.exec("UPDATE stock SET remain = remain - 1 WHERE prize_id = $1 AND bucket = $2 AND remain > 0",
                     {tt.prize_id, bucket}) == 1;
        if (!ok) return tx.rollback_only();
        bench::raw_ledger_delivery(tx, bill, id, user, i);
      });
      return ok;
    };
  });
}

// What the server ran for one cell, per successful claim, from pg_stat_statements (this user's
// statements in this database, reset before the cell; the workers' session setup is a negligible
// part). Execution time includes waiting for row locks (at 16 workers on one hot row, mostly that)
// and excludes planning; statements that failed are not counted, and those of a claim that was
// refused or retried are counted against the claims that succeeded.
struct ServerCost {
  double statements = 0, exec_ms = 0;
  std::vector<std::tuple<std::string, double, double>> top;  // query, calls per claim, ms per claim
};
void stats_reset(const std::string& pg) {
  auto s = store::open_postgres(pg, {});
  s->exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
  // (only this user's statements in this database: a suite or another bench on the same server keeps its own)
  s->exec("SELECT pg_stat_statements_reset((SELECT oid FROM pg_roles WHERE rolname = current_user), "
          "(SELECT oid FROM pg_database WHERE datname = current_database()), 0)");
}
ServerCost stats_read(const std::string& pg, int64_t claims) {
  ServerCost c;
  if (claims <= 0) return c;
  auto rows = store::open_postgres(pg, {})->autocommit().query(
      "SELECT regexp_replace(query, '\\s+', ' ', 'g'), calls, CAST(round(CAST(total_exec_time * 1000 AS NUMERIC)) "
      "AS BIGINT) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' AND userid = (SELECT oid FROM pg_roles "
      "WHERE rolname = current_user) AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
      "ORDER BY total_exec_time DESC",
      {});
  for (auto& r : rows.rows) {
    const double calls = double(r.i64(1)) / double(claims), ms = double(r.i64(2)) / 1000.0 / double(claims);
    c.statements += calls;
    c.exec_ms += ms;
    if (c.top.size() < 6) c.top.emplace_back(r.str(0).substr(0, 90), calls, ms);
  }
  return c;
}
void print_cost(const char* cell, const ServerCost& c, bool json, const std::string& scenario, int workers) {
  if (json) {
    std::printf("{\"pg_stats\":\"%s\",\"scenario\":\"%s\",\"workers\":%d,\"statements_per_claim\":%.2f,"
                "\"exec_ms_per_claim\":%.4f}\n",
                cell, scenario.c_str(), workers, c.statements, c.exec_ms);
    return;
  }
  std::printf("    %-11s per claim: %5.2f statements, %.3f ms executing on the server\n", cell, c.statements, c.exec_ms);
  for (auto& [q, calls, ms] : c.top) std::printf("      %5.2f x %.3f ms  %s\n", calls, ms, q.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  std::string pg;
  if (const char* e = std::getenv("REWARDCTL_BENCH_PG")) pg = e;
  else if (const char* e2 = std::getenv("REWARDCTL_TEST_PG")) pg = e2;
  bool do_pg = true, do_sqlite = true, ladder = false, kinds = false, json = false, pg_stats = false;
  std::vector<int> workers{1, 4, 16};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) g_seconds = std::atof(argv[++i]);
    else if (a == "--pg" && i + 1 < argc) pg = argv[++i];
    else if (a == "--no-pg") do_pg = false;
    else if (a == "--no-sqlite") do_sqlite = false;
    else if (a == "--ladder") ladder = true;
    else if (a == "--kinds") kinds = true;
    else if (a == "--pg-stats") pg_stats = true;
    else if ((a == "-o" || a == "--output") && i + 1 < argc && std::string(argv[i + 1]) == "json") json = (++i, true);
    else if (a == "--workers" && i + 1 < argc) {
      workers.clear();
      std::stringstream ss(argv[++i]);
      std::string x;
      while (std::getline(ss, x, ',')) workers.push_back(std::atoi(x.c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: claim [--seconds S] [--pg CONNINFO] [--no-pg] [--no-sqlite] [--workers 1,4,16] [--ladder] [--kinds] "
                   "[--pg-stats] "
                   "[-o json]\n");
      return 64;
    }
  }
  if (do_pg && pg.empty()) {
    std::fprintf(stderr, "claim: no PostgreSQL (give --pg, REWARDCTL_BENCH_PG or REWARDCTL_TEST_PG, or --no-pg)\n");
    return 69;
  }
  std::vector<std::string> backends;
  if (do_sqlite) backends.push_back("sqlite");
  if (do_pg) backends.push_back("postgres");
  if (kinds) {
    if (pg.empty()) {
      std::fprintf(stderr, "claim: --kinds measures PostgreSQL's one statement: give --pg\n");
      return 69;
    }
    if (!json)
      std::printf("%-9s %-8s %7s %14s %12s %11s\n", "backend", "kind", "workers", "one-statement/s", "full-flow/s",
                  "one/full");
    int run = 0;
    for (const std::string kind : {"lottery", "redpack"})
      for (int w : workers) {
        auto t = fresh("postgres", pg, 16, run++, "", kind);
        // alternated in short rounds, so that a load change on the machine hits both alike
        const double whole = g_seconds;
        g_seconds = whole / 4;
        double one = 0, full = 0;
        for (int round = 0; round < 4; ++round) {
          one += run_core(t, w, true, true) / 4;
          full += run_core(t, w, true, false) / 4;
        }
        g_seconds = whole;
        ServerCost one_cost, full_cost;
        if (pg_stats) {
          g_seconds = whole / 4;
          stats_reset(pg);
          run_core(t, w, true, true);
          one_cost = stats_read(pg, g_last_done);
          stats_reset(pg);
          run_core(t, w, true, false);
          full_cost = stats_read(pg, g_last_done);
          g_seconds = whole;
        }
        drop(t, pg);
        if (json)
          std::printf("{\"backend\":\"postgres\",\"kind\":\"%s\",\"workers\":%d,\"one_statement_per_s\":%.0f,"
                      "\"full_flow_per_s\":%.0f,\"one_over_full\":%.3f}\n",
                      kind.c_str(), w, one, full, full > 0 ? one / full : 0);
        else
          std::printf("%-9s %-8s %7d %14.0f %12.0f %11.2f\n", "postgres", kind.c_str(), w, one, full,
                      full > 0 ? one / full : 0);
        if (pg_stats) {
          print_cost("one-stmt", one_cost, json, kind, w);
          print_cost("full-flow", full_cost, json, kind, w);
        }
        std::fflush(stdout);
      }
    if (!json)
      std::printf("\nEngine::claim delivered through the ledger, 16 stock buckets per prize, a budget and a per-user daily\n"
                  "limit. one-statement: rewardctl_claim_one (docs/design.md 4); full-flow: one_statement_claims = false.\n");
    return 0;
  }
  if (ladder) {
    // The budget ladder's price on the claim's hot path: one statement either way (the ladder's has
    // two more comparisons and RETURNING), measured as budget-with-ladder / budget-alone.
    std::printf("%-9s %7s %12s %12s %13s\n", "backend", "workers", "budget/s", "ladder/s", "ladder/budget");
    int run = 0;
    for (auto& b : backends)
      for (int w : workers) {
        // alternated in short rounds, so that a load change on the machine hits both alike
        auto plain = fresh(b, pg, 16, run++, "plain");
        auto lad = fresh(b, pg, 16, run++, "ladder");
        const double whole = g_seconds;
        g_seconds = whole / 4;
        double pb = 0, pl = 0;
        for (int round = 0; round < 4; ++round) {
          pb += run_core(plain, w, false) / 4;
          pl += run_core(lad, w, false) / 4;
        }
        g_seconds = whole;
        drop(plain, pg);
        drop(lad, pg);
        std::printf("%-9s %7d %12.0f %12.0f %13.2f\n", b.c_str(), w, pb, pl, pb > 0 ? pl / pb : 0);
        std::fflush(stdout);
      }
    std::printf("\nbudget: Engine::claim on an activity with a budget (never exhausted), 16 stock buckets, no delivery.\n"
                "ladder: the same activity with [budget] warn_at/degrade_at/stop_at (never reached).\n");
    return 0;
  }
  if (!json)
    std::printf("%-9s %-17s %7s %9s %9s %13s %12s %11s %9s %14s\n", "backend", "scenario", "workers", "core/s",
                "raw/s", "core+ledger/s", "raw-equiv/s", "ledger/req", "core/raw", "core/raw 1-row");
  int run = 0;
  std::map<std::pair<std::string, int>, double> raw_hot;
  for (auto& b : backends) {
    for (int buckets : {1, 16}) {
      for (int w : workers) {
        auto t = fresh(b, pg, buckets, run++, "limited");
        double raw = run_raw(t, w, buckets > 1);
        double core = run_core(t, w, false);
        const bool stats = pg_stats && b == "postgres";
        if (stats) stats_reset(pg);
        double req = run_raw_equivalent(t, w, buckets > 1);
        ServerCost req_cost, full_cost;
        if (stats) req_cost = stats_read(pg, g_last_done), stats_reset(pg);
        double full = run_core(t, w, true);
        if (stats) full_cost = stats_read(pg, g_last_done);
        drop(t, pg);
        if (buckets == 1) raw_hot[{b, w}] = raw;
        double hot = raw_hot[{b, w}];
        const char* scenario = buckets == 1 ? "one hot prize" : "16 stock buckets";
        if (json)
          std::printf("{\"backend\":\"%s\",\"scenario\":\"%s\",\"workers\":%d,\"core_per_s\":%.0f,"
                      "\"core_ledger_per_s\":%.0f,\"raw_per_s\":%.0f,\"raw_equivalent_per_s\":%.0f,"
                      "\"core_ledger_over_raw_equivalent\":%.3f,\"core_over_raw\":%.3f}\n",
                      b.c_str(), scenario, w, core, full, raw, req, req > 0 ? full / req : 0, raw > 0 ? core / raw : 0);
        else
          std::printf("%-9s %-17s %7d %9.0f %9.0f %13.0f %12.0f %11.2f %9.2f %14.2f\n", b.c_str(), scenario, w, core,
                      raw, full, req, req > 0 ? full / req : 0, raw > 0 ? core / raw : 0, hot > 0 ? core / hot : 0);
        if (stats) {
          print_cost("raw-equiv", req_cost, json, scenario, w);
          print_cost("core+ledger", full_cost, json, scenario, w);
        }
        std::fflush(stdout);
      }
    }
  }
  if (!json)
    std::printf(
        "\nactivity: direct, budget and a per-user daily limit, one prize delivered by the ledger channel.\n"
        "raw: UPDATE stock ... remain > 0 + INSERT unique biz_id + COMMIT (16 buckets: one bucket per worker).\n"
        "core: Engine::claim, steps 1-8 of the common flow, one transaction, no delivery (PostgreSQL: one\n"
        "  statement, rewardctl_claim_one, docs/design.md 4).\n"
        "raw-equiv: the rows core+ledger writes (limit counter, grant, 2 status-log rows, budget, stock, bill,\n"
        "  ledger entry, account) by prepared statements in one transaction, no reads.\n"
        "core+ledger: Engine::claim delivered through the in-database ledger, in the claim's own transaction\n"
        "  (PostgreSQL: the same one statement).\n"
        "ledger/req = core+ledger / raw-equiv (goal >= 0.8); core/raw = core / raw. Targets (DESIGN 8): PostgreSQL\n"
        "hot prize 16 workers >= 0.7; buckets >= 2.5 x the raw single-row claim; SQLite >= 0.4.\n");
  return 0;
}
