// bench/list_issue: grants per second of `list-issue run` (every user through the engine's common
// flow, ledger delivery, chunked transactions) against the database's raw equivalent measured in
// the same invocation: chunked transactions of stock update + grant insert + status-log insert
// through prepared statements; and the raw equivalent of what the core writes: every row list-issue
// writes for a user (grant, its status-log rows, stock, bill, ledger entry and account, the item's
// move and its status-log row) written by hand into the same tables, chunked the same way. On
// PostgreSQL also with 2 and 4 workers sharing the batch (FOR UPDATE SKIP LOCKED). Prints a table
// (or one JSON object per cell with -o json) and the peak RSS.
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
#include "raw_ledger.hpp"
#include "jobs/list_issue/list_issue.hpp"

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
         std::to_string(2 * users) + "\n";  // the core's batch and the raw equivalent's
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

// Plans and approves a batch of the list; returns its number.
std::string planned_batch(store::Store& st, const std::string& list, int64_t users) {
  SystemClock clock;
  li::PlanOptions p;
  p.activity = "bench";
  p.prize = "p";
  p.file = list;
  p.operator_name = "planner";
  auto planned = li::plan(st, p, clock);
  if (!planned.stored || planned.users != users) throw std::runtime_error("the bench list was not planned");
  li::approve(st, planned.batch_no, "approver", clock.now_ms(), false);
  return planned.batch_no;
}

// The raw equivalent of a list-issue run: chunks of a planned batch's pending items, one
// transaction each, and per user the rows the core writes, by prepared statements with no reads:
// the grant (straight to success with its bill number), its two status-log rows (one statement),
// stock - 1, the bill, the ledger entry, the account, the item's move and its status-log row.
double run_raw_equivalent(const Target& t, const std::string& list, int64_t users, int64_t chunk) {
  auto st = open(t);
  const std::string batch = planned_batch(*st, list, users);
  auto ids = st->autocommit().query(
      "SELECT a.id, p.id, b.id FROM activity a JOIN prize p ON p.activity_id = a.id JOIN list_batch b ON b.batch_no = $1",
      {batch});
  const int64_t act = ids[0].i64(0), prize = ids[0].i64(1), batch_id = ids[0].i64(2);
  auto t0 = Clk::now();
  int64_t done = 0;
  for (bool more = true; more;) {
    st->transact(store::TxMode::write, [&](store::Tx& tx) {
      auto items = tx.query("SELECT id, user_id FROM list_item WHERE batch_id = $1 AND state = 'pending' ORDER BY id LIMIT $2",
                            {batch_id, chunk});
      more = !items.empty();
      for (auto& it : items.rows) {
        const int64_t item = it.i64(0), now = item;
        const std::string user = it.str(1), biz = batch + ":" + user, bill = "B" + biz;
        const int64_t id =
            tx.query("INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state, "
                     "bucket, pool_version, channel, bill_no, list_item_id, source, created_at, updated_at) VALUES ($1, $2, "
                     "$3, $4, $5, 1, 100, 'success', 0, 1, 'ledger', $6, $7, 'list-issue', $8, $8) RETURNING id",
                     {"R" + biz, biz, act, prize, user, bill, item, now})[0]
                .i64(0);
        tx.exec("INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, created_at) VALUES "
                "('grant', $1, NULL, 'init', 'bench', 'claim', $2), ('grant', $1, 'init', 'success', 'bench', "
                "'ledger credited', $2)",
                {id, now});
        if (tx.exec("UPDATE stock SET remain = remain - 1 WHERE prize_id = $1 AND bucket = 0 AND remain > 0", {prize}) != 1)
          throw std::runtime_error("raw stock ran out");
        bench::raw_ledger_delivery(tx, bill, id, user, now);
        tx.exec("UPDATE list_item SET state = 'issued', record_code = $2, updated_at = $3 WHERE id = $1 AND state = "
                "'pending'",
                {item, "R" + biz, now});
        tx.exec("INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, created_at) VALUES "
                "('list_item', $1, 'pending', 'issued', 'bench', $2, $3)",
                {item, "R" + biz, now});
        ++done;
      }
    });
  }
  if (done != users) throw std::runtime_error("the raw equivalent did not issue every user");
  return double(users) / std::chrono::duration<double>(Clk::now() - t0).count();
}

double run_core(const Target& t, const std::string& list, int64_t users, int64_t chunk, int workers) {
  auto st = open(t);
  SystemClock clock;
  const std::string batch = planned_batch(*st, list, users);
  li::RunOptions o;
  o.batch_no = batch;
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
    std::printf("%-9s %8s %7s %6s %12s %12s %12s %9s %10s %13s\n", "backend", "users", "workers", "chunk",
                "core grants/s", "raw grants/s", "raw-equiv/s", "core/raw", "core/req", "vs 1 worker");
  int run = 0;
  std::vector<std::pair<std::string, std::vector<int>>> plan;
  if (do_sqlite) plan.push_back({"sqlite", {1}});
  if (do_pg) plan.push_back({"postgres", pg_workers});
  for (auto& [backend, ws] : plan) {
    double one = 0, raw = 0, req = 0;
    for (int w : ws) {
      auto t = fresh(backend, pg, users, run++);
      std::string list = write_list(t.dir, users);
      if (raw == 0) raw = run_raw(t, users, chunk);  // the raw limit, once per backend
      if (req == 0) req = run_raw_equivalent(t, list, users, chunk);
      double core = run_core(t, list, users, chunk, w);
      if (w == 1) one = core;
      drop(t, pg);
      std::remove(list.c_str());
      if (json)
        std::printf("{\"v\":1,\"backend\":\"%s\",\"users\":%lld,\"workers\":%d,\"chunk\":%lld,\"core_per_s\":%.0f,"
                    "\"raw_per_s\":%.0f,\"raw_equivalent_per_s\":%.0f,\"ratio\":%.3f,\"ratio_raw_equivalent\":%.3f,"
                    "\"vs_1_worker\":%.3f,\"peak_rss_kb\":%ld}\n",
                    backend.c_str(), (long long)users, w, (long long)chunk, core, raw, req, core / raw, core / req,
                    one > 0 ? core / one : 0, peak_rss_kb());
      else
        std::printf("%-9s %8lld %7d %6lld %12.0f %12.0f %12.0f %9.2f %10.2f %13.2f\n", backend.c_str(),
                    (long long)users, w, (long long)chunk, core, raw, req, core / raw, core / req,
                    one > 0 ? core / one : 0);
      std::fflush(stdout);
    }
  }
  if (!json)
    std::printf("\npeak RSS %ld kB (goal < 65536)\n"
                "raw: chunks of N users in one transaction: UPDATE stock ... remain > 0, INSERT grant, INSERT status log.\n"
                "raw-equiv (req): the rows the core writes per user (grant, 2 status-log rows, stock, bill, ledger entry,\n"
                "  account, the item and its status-log row) by hand into the same tables, chunks of N users.\n"
                "core: list-issue run, every user through the engine's common flow and the ledger channel.\n"
                "Goals: core/raw >= 0.6; PostgreSQL 2 workers >= 1.5 x 1 worker where cores allow.\n",
                peak_rss_kb());
  return 0;
}
