// bench/list_issue: grants per second of `list-issue run` (every user through the engine's common
// flow, ledger delivery, chunked transactions) against the database's raw equivalent measured in
// the same invocation: chunked transactions of stock update + grant insert + status-log insert
// through prepared statements. On PostgreSQL also with 2 and 4 workers sharing the batch
// (FOR UPDATE SKIP LOCKED). Prints a table (or one JSON object per cell with -o json) and the peak RSS.
//
//   bench/list_issue [--users N (default 20000; 1000000 for the issue's figure)] [--chunk N]
//                    [--pg CONNINFO] [--no-pg] [--no-sqlite] [--workers 1,2,4] [-o json]
// PostgreSQL: --pg, else $REWARDCTL_BENCH_PG, else $REWARDCTL_TEST_PG.
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/activity/activity.hpp"
#include "core/store/migrate.hpp"
#include "jobs/list_issue.hpp"

using namespace rc;
namespace li = rc::jobs::list_issue;
using Clk = std::chrono::steady_clock;

namespace {

struct Target {
  std::string name, url, schema, dir;
};

std::string definition(int64_t users) {
  return "code = \"bench\"\nname = \"bench\"\nkind = \"direct\"\ntimezone = \"UTC\"\n"
         "start = \"2020-01-01T00:00:00Z\"\nend = \"2099-01-01T00:00:00Z\"\n"
         "[items.coupon]\nkind = \"coupon\"\nunit_cost_cents = 100\nchannel = \"ledger\"\n"
         "[[prizes]]\ncode = \"p\"\nitem = \"coupon\"\namount = 1\nstock = " +
         std::to_string(users) + "\n";
}

std::unique_ptr<store::Store> open(const Target& t) {
  store::StoreOptions o;
  o.create_if_missing = true;
  o.retries = 50;
  o.busy_timeout_ms = 30000;
  return store::open_store(store::parse_dsn(t.url, "bench"), o);
}

Target fresh(const std::string& backend, const std::string& pg, int64_t users, int run) {
  Target t;
  t.name = backend;
  t.dir = "/tmp/rcbench_li_" + std::to_string(getpid());
  std::string cmd = "mkdir -p " + t.dir;
  (void)!system(cmd.c_str());
  if (backend == "sqlite") {
    std::string path = t.dir + "/b" + std::to_string(run) + ".db";
    for (auto suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
    t.url = "sqlite:" + path;
  } else {
    t.schema = "bench_li_" + std::to_string(getpid()) + "_" + std::to_string(run);
    auto s = store::open_postgres(pg, {});
    s->exec("DROP SCHEMA IF EXISTS " + t.schema + " CASCADE");
    s->exec("CREATE SCHEMA " + t.schema);
    t.url = pg + " options='-c search_path=" + t.schema + "'";
  }
  auto s = open(t);
  store::migrate(*s, 0);
  auto parsed = activity::parse_definition(definition(users), "bench");
  if (!parsed.def) throw std::runtime_error("bench definition does not parse");
  activity::create(*s, *parsed.def, definition(users), {true, false}, {"bench", false}, 0);
  // The raw equivalent's own tables: one stock row, grants with a unique biz_id, a status log.
  const std::string pk = backend == "sqlite" ? "INTEGER PRIMARY KEY" : "BIGSERIAL PRIMARY KEY";
  s->transact(store::TxMode::write, [&](store::Tx& tx) {
    tx.exec_script("CREATE TABLE raw_stock (id INTEGER PRIMARY KEY, remain BIGINT NOT NULL);"
                   "CREATE TABLE raw_grant (id " + pk +
                   ", biz_id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL, state TEXT NOT NULL, created_at BIGINT NOT NULL);"
                   "CREATE TABLE raw_log (id " + pk +
                   ", entity_id BIGINT NOT NULL, to_state TEXT NOT NULL, created_at BIGINT NOT NULL)");
    tx.exec("INSERT INTO raw_stock (id, remain) VALUES (1, $1)", {users});
  });
  return t;
}

void drop(const Target& t, const std::string& pg) {
  if (t.name == "postgres") store::open_postgres(pg, {})->exec("DROP SCHEMA IF EXISTS " + t.schema + " CASCADE");
  else std::remove(t.url.substr(7).c_str());
}

std::string write_list(const std::string& dir, int64_t users) {
  std::string path = dir + "/users.csv";
  std::ofstream f(path);
  f << "user_id\n";
  for (int64_t i = 0; i < users; ++i) f << "user_" << i << "\n";
  return path;
}

// Chunks of `chunk` users, one transaction each: stock - 1, the grant, its status-log row.
double run_raw(const Target& t, int64_t users, int64_t chunk) {
  auto st = open(t);
  auto t0 = Clk::now();
  for (int64_t from = 0; from < users; from += chunk) {
    st->transact(store::TxMode::write, [&](store::Tx& tx) {
      for (int64_t i = from; i < std::min(users, from + chunk); ++i) {
        if (tx.exec("UPDATE raw_stock SET remain = remain - 1 WHERE id = 1 AND remain > 0") != 1)
          throw std::runtime_error("raw stock ran out");
        std::string u = "user_" + std::to_string(i);
        int64_t id = tx.query("INSERT INTO raw_grant (biz_id, user_id, state, created_at) VALUES ($1, $2, 'success', $3) "
                              "RETURNING id",
                              {"b:" + u, u, i})[0]
                         .i64(0);
        tx.exec("INSERT INTO raw_log (entity_id, to_state, created_at) VALUES ($1, 'success', $2)", {id, i});
      }
    });
  }
  return double(users) / std::chrono::duration<double>(Clk::now() - t0).count();
}

double run_core(const Target& t, const std::string& list, int64_t users, int64_t chunk, int workers) {
  auto st = open(t);
  SystemClock clock;
  li::PlanOptions p;
  p.activity = "bench";
  p.prize = "p";
  p.file = list;
  p.operator_name = "planner";
  auto planned = li::plan(*st, p, clock);
  if (!planned.stored || planned.users != users) throw std::runtime_error("the bench list was not planned");
  li::approve(*st, planned.batch_no, "approver", clock.now_ms(), false);
  li::RunOptions o;
  o.batch_no = planned.batch_no;
  o.workers = workers;
  o.chunk = chunk;
  o.operator_name = "bench";
  o.open_store = [&t] { return open(t); };
  o.engine.actor = "bench";
  auto t0 = Clk::now();
  auto r = li::run(*st, o, clock);
  double secs = std::chrono::duration<double>(Clk::now() - t0).count();
  if (r.issued != users || r.state != "done") throw std::runtime_error("the bench batch did not finish: " + r.state);
  return double(users) / secs;
}

long peak_rss_kb() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  std::string pg;
  if (const char* e = std::getenv("REWARDCTL_BENCH_PG")) pg = e;
  else if (const char* e2 = std::getenv("REWARDCTL_TEST_PG")) pg = e2;
  bool do_pg = true, do_sqlite = true, json = false;
  int64_t users = 20'000, chunk = 500;
  std::vector<int> pg_workers{1, 2, 4};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--users" && i + 1 < argc) users = std::atoll(argv[++i]);
    else if (a == "--chunk" && i + 1 < argc) chunk = std::atoll(argv[++i]);
    else if (a == "--pg" && i + 1 < argc) pg = argv[++i];
    else if (a == "--no-pg") do_pg = false;
    else if (a == "--no-sqlite") do_sqlite = false;
    else if (a == "-o" && i + 1 < argc) json = std::string(argv[++i]) == "json";
    else if (a == "--workers" && i + 1 < argc) {
      pg_workers.clear();
      std::stringstream ss(argv[++i]);
      std::string x;
      while (std::getline(ss, x, ',')) pg_workers.push_back(std::atoi(x.c_str()));
    } else {
      std::fprintf(stderr, "usage: list_issue [--users N] [--chunk N] [--pg CONNINFO] [--no-pg] [--no-sqlite] "
                           "[--workers 1,2,4] [-o json]\n");
      return 64;
    }
  }
  if (users < 1 || chunk < 1) return 64;
  if (do_pg && pg.empty()) {
    std::fprintf(stderr, "list_issue: no PostgreSQL (give --pg, REWARDCTL_BENCH_PG or REWARDCTL_TEST_PG, or --no-pg)\n");
    return 69;
  }
  if (!json)
    std::printf("%-9s %8s %7s %6s %12s %12s %9s %13s\n", "backend", "users", "workers", "chunk", "core grants/s",
                "raw grants/s", "core/raw", "vs 1 worker");
  int run = 0;
  std::vector<std::pair<std::string, std::vector<int>>> plan;
  if (do_sqlite) plan.push_back({"sqlite", {1}});
  if (do_pg) plan.push_back({"postgres", pg_workers});
  for (auto& [backend, ws] : plan) {
    double one = 0, raw = 0;
    for (int w : ws) {
      auto t = fresh(backend, pg, users, run++);
      std::string list = write_list(t.dir, users);
      if (raw == 0) raw = run_raw(t, users, chunk);  // the raw limit, once per backend
      double core = run_core(t, list, users, chunk, w);
      if (w == 1) one = core;
      drop(t, pg);
      std::remove(list.c_str());
      if (json)
        std::printf("{\"v\":1,\"backend\":\"%s\",\"users\":%lld,\"workers\":%d,\"chunk\":%lld,\"core_per_s\":%.0f,"
                    "\"raw_per_s\":%.0f,\"ratio\":%.3f,\"vs_1_worker\":%.3f,\"peak_rss_kb\":%ld}\n",
                    backend.c_str(), (long long)users, w, (long long)chunk, core, raw, core / raw,
                    one > 0 ? core / one : 0, peak_rss_kb());
      else
        std::printf("%-9s %8lld %7d %6lld %12.0f %12.0f %9.2f %13.2f\n", backend.c_str(), (long long)users, w,
                    (long long)chunk, core, raw, core / raw, one > 0 ? core / one : 0);
      std::fflush(stdout);
    }
  }
  if (!json)
    std::printf("\npeak RSS %ld kB (goal < 65536)\n"
                "raw: chunks of N users in one transaction: UPDATE stock ... remain > 0, INSERT grant, INSERT status log.\n"
                "core: list-issue run, every user through the engine's common flow and the ledger channel.\n"
                "Goals: core/raw >= 0.6; PostgreSQL 2 workers >= 1.5 x 1 worker where cores allow.\n",
                peak_rss_kb());
  return 0;
}
