// bench/release: held requests released per second when a fuse is lifted at peak - `fuse unblock`
// sending every request the fuse held through the claim flow again (Engine::release_held_many, in
// chunks) while claims of the same activity run beside it - against the in-process core measured in
// the same run: Engine::claim, one request per transaction, alone (1 worker, and the claimers'
// count). The activity has a budget (the row every claim and every release takes from) and a
// per-user daily limit; prize "p" is blocked and holds the requests, the claimers claim prize "q".
// Afterwards every held user must have exactly one delivered grant: the bench fails (exit 1)
// otherwise. Prints a table, or with -o json one JSON object per backend.
//
//   bench/release [--held N (default 5000)] [--claimers K (default 4)] [--load F (the claimers'
//                 offered rate during the release as a share of their pace alone; default: 0.5, then
//                 0 = flat out)] [--seconds S (the alone measures, default 2)] [--pg CONNINFO]
//                 [--no-pg] [--no-sqlite] [-o json]
// PostgreSQL: --pg, else $REWARDCTL_BENCH_PG, else $REWARDCTL_TEST_PG.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/activity/activity.hpp"
#include "core/engine/engine.hpp"
#include "core/store/migrate.hpp"
#include "jobs/fuse/fuse.hpp"

using namespace rc;
using Clk = std::chrono::steady_clock;

namespace {

struct Target {
  std::string name, url, schema;
};

const char* kDefinition =
    "code = \"bench\"\nname = \"bench\"\nkind = \"direct\"\ntimezone = \"UTC\"\n"
    "start = \"2020-01-01T00:00:00Z\"\nend = \"2099-01-01T00:00:00Z\"\nbudget_cents = 1000000000000000\n"
    "[limit]\ncount = 1\nperiod = \"day\"\n"
    "[items.coupon]\nkind = \"coupon\"\nunit_cost_cents = 100\nchannel = \"ledger\"\n"
    "[[prizes]]\ncode = \"p\"\nitem = \"coupon\"\namount = 1\nstock = 100000000\nstock_buckets = 16\n"
    "[[prizes]]\ncode = \"q\"\nitem = \"coupon\"\namount = 1\nstock = 100000000\nstock_buckets = 16\n";

std::unique_ptr<store::Store> open(const Target& t) {
  store::StoreOptions o;
  o.create_if_missing = true;
  o.retries = 50;
  o.busy_timeout_ms = 30000;
  return store::open_store(store::parse_dsn(t.url, "bench"), o);
}

Target fresh(const std::string& backend, const std::string& pg) {
  Target t;
  t.name = backend;
  if (backend == "sqlite") {
    const std::string path = "/tmp/rcbench_release_" + std::to_string(getpid()) + ".db";
    for (auto suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
    t.url = "sqlite:" + path;
  } else {
    t.schema = "bench_rel_" + std::to_string(getpid());
    auto s = store::open_postgres(pg, {});
    s->exec("DROP SCHEMA IF EXISTS " + t.schema + " CASCADE");
    s->exec("CREATE SCHEMA " + t.schema);
    t.url = pg + " options='-c search_path=" + t.schema + "'";
  }
  auto s = open(t);
  store::migrate(*s, 0);
  auto parsed = activity::parse_definition(kDefinition, "bench");
  if (!parsed.def) throw std::runtime_error("bench definition does not parse");
  activity::create(*s, *parsed.def, kDefinition, {true, false}, {"bench", false}, 0);
  return t;
}

void drop(const Target& t, const std::string& pg) {
  if (t.name == "postgres") store::open_postgres(pg, {})->exec("DROP SCHEMA IF EXISTS " + t.schema + " CASCADE");
  else
    for (auto suffix : {"", "-wal", "-shm"}) unlink((t.url.substr(7) + suffix).c_str());
}

engine::ClaimRequest request(const std::string& user, const std::string& prize) {
  engine::ClaimRequest r;
  r.activity = "bench";
  r.prize = prize;
  r.user = user;
  r.biz_id = user;
  r.deliver = true;
  return r;
}

// Claimers on prize q: `workers` threads, each on its own session, until `stop`; counts grants.
struct Claimers {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> granted{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  // rate > 0: the claimers together offer `rate` claims per second (each paced to its share, as
  // clients at a steady load would), else as many as they can.
  Claimers(const Target& t, int workers, const std::string& tag, SystemClock& clock, double rate = 0) {
    std::atomic<int> ready{0};
    for (int w = 0; w < workers; ++w)
      ts.emplace_back([&, w, tag] {
        auto st = open(t);
        engine::EngineOptions o;
        o.actor = "bench";
        engine::Engine eng(*st, clock, o);
        ++ready;
        const auto t0 = Clk::now();
        for (int64_t i = 0; !stop; ++i) {
          if (rate > 0) std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clk::duration>(
                                                               std::chrono::duration<double>(double(i) * workers / rate)));
          try {
            if (eng.claim(request(tag + std::to_string(w) + "_" + std::to_string(i), "q")).status ==
                engine::Status::granted)
              ++granted;
          } catch (const std::exception& e) {
            if (errors++ < 3) std::fprintf(stderr, "bench claimer error: %s\n", e.what());
          }
        }
      });
    while (ready < workers) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  void finish() {
    stop = true;
    for (auto& t : ts) t.join();
  }
};

double claims_alone(const Target& t, int workers, double seconds, const std::string& tag, SystemClock& clock) {
  Claimers c(t, workers, tag, clock);
  const int64_t before = c.granted;
  auto t0 = Clk::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const int64_t n = c.granted - before;
  const double secs = std::chrono::duration<double>(Clk::now() - t0).count();
  c.finish();
  return double(n) / secs;
}

struct Figures {
  int64_t held = 0, released = 0;
  double release_per_s = 0, release_seconds = 0, alone_1 = 0, alone_k = 0, beside_k = 0, load = 0;
  bool exact = false;
};

// load: the claimers' offered rate during the release as a share of their pace alone (0: flat out).
Figures run_backend(const Target& t, int64_t n_held, int claimers, double seconds, double load) {
  SystemClock clock;
  Figures f;
  f.load = load;
  f.alone_1 = claims_alone(t, 1, seconds, "a1_", clock);
  f.alone_k = claims_alone(t, claimers, seconds, "ak_", clock);
  auto st = open(t);
  engine::EngineOptions o;
  o.actor = "bench";
  engine::Engine eng(*st, clock, o);
  jobs::fuse::block(*st, "bench", std::string("p"), "bench", "bench", clock.now_ms(), false);
  // the held requests: claims of prize p while it is blocked, 4 sessions at once
  {
    std::vector<std::thread> ts;
    std::atomic<int64_t> held{0};
    for (int w = 0; w < 4; ++w)
      ts.emplace_back([&, w] {
        auto s = open(t);
        engine::Engine e(*s, clock, o);
        for (int64_t i = w; i < n_held; i += 4)
          if (e.claim(request("h_" + std::to_string(i), "p")).status == engine::Status::held) ++held;
      });
    for (auto& th : ts) th.join();
    f.held = held;
  }
  // at peak: the claimers run, then the fuse is lifted
  Claimers c(t, claimers, "b_", clock, load * f.alone_k);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t before = c.granted;
  auto t0 = Clk::now();
  auto d = jobs::fuse::unblock(eng, "bench", std::string("p"), "bench", "bench", clock.now_ms(), false);
  f.release_seconds = std::chrono::duration<double>(Clk::now() - t0).count();
  const int64_t beside = c.granted - before;
  c.finish();
  f.released = d.held.granted;
  f.release_per_s = double(f.released) / f.release_seconds;
  f.beside_k = double(beside) / f.release_seconds;
  // exactly one delivered grant for every held user, nothing left pending
  auto q = [&](const std::string& sql) { return st->autocommit().query(sql, {})[0].i64(0); };
  f.exact = f.held == n_held && f.released == n_held &&
            q("SELECT count(*) FROM grants WHERE user_id LIKE 'h!_%' ESCAPE '!' AND state = 'success'") == n_held &&
            q("SELECT count(DISTINCT user_id) FROM grants WHERE user_id LIKE 'h!_%' ESCAPE '!' AND state = 'success'") == n_held &&
            q("SELECT count(*) FROM grants WHERE state = 'pending'") == 0;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  std::string pg;
  if (const char* e = std::getenv("REWARDCTL_BENCH_PG")) pg = e;
  else if (const char* e2 = std::getenv("REWARDCTL_TEST_PG")) pg = e2;
  bool do_pg = true, do_sqlite = true, json = false;
  int64_t held = 5000;
  int claimers = 4;
  double seconds = 2;
  std::vector<double> loads{0.5, 0};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--held" && i + 1 < argc) held = std::atoll(argv[++i]);
    else if (a == "--claimers" && i + 1 < argc) claimers = std::atoi(argv[++i]);
    else if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--load" && i + 1 < argc) loads = {std::atof(argv[++i])};
    else if (a == "--pg" && i + 1 < argc) pg = argv[++i];
    else if (a == "--no-pg") do_pg = false;
    else if (a == "--no-sqlite") do_sqlite = false;
    else if (a == "-o" && i + 1 < argc) json = std::string(argv[++i]) == "json";
    else {
      std::fprintf(stderr, "usage: release [--held N] [--claimers K] [--load F] [--seconds S] [--pg CONNINFO] [--no-pg] "
                           "[--no-sqlite] [-o json]\n");
      return 64;
    }
  }
  if (held < 1 || claimers < 1 || seconds <= 0) return 64;
  if (do_pg && pg.empty()) {
    std::fprintf(stderr, "release: no PostgreSQL (give --pg, REWARDCTL_BENCH_PG or REWARDCTL_TEST_PG, or --no-pg)\n");
    return 69;
  }
  if (!json)
    std::printf("%-9s %6s %8s %5s %10s %8s %10s %10s %10s %10s %12s %6s\n", "backend", "held", "claimers", "load",
                "released/s", "seconds", "alone 1/s", "alone K/s", "beside K/s", "rel/alone1", "beside/alone", "exact");
  bool all_exact = true;
  std::vector<std::string> backends;
  if (do_sqlite) backends.push_back("sqlite");
  if (do_pg) backends.push_back("postgres");
  for (const auto& b : backends)
    for (double load : loads) {
      auto t = fresh(b, pg);
      Figures f = run_backend(t, held, claimers, seconds, load);
      drop(t, pg);
      all_exact = all_exact && f.exact;
      const double rel_alone = f.alone_1 > 0 ? f.release_per_s / f.alone_1 : 0;
      const double beside_alone = f.alone_k > 0 ? f.beside_k / f.alone_k : 0;
      const std::string load_s = load > 0 ? std::to_string(int(load * 100 + 0.5)) + "%" : "max";
      if (json)
        std::printf("{\"v\":1,\"backend\":\"%s\",\"held\":%lld,\"claimers\":%d,\"load\":%.2f,\"released_per_s\":%.0f,"
                    "\"seconds\":%.3f,\"claims_alone_1_per_s\":%.0f,\"claims_alone_k_per_s\":%.0f,"
                    "\"claims_beside_k_per_s\":%.0f,\"ratio_release_claim_1\":%.3f,\"ratio_beside_alone\":%.3f,"
                    "\"exact\":%s}\n",
                    b.c_str(), (long long)f.held, claimers, load, f.release_per_s, f.release_seconds, f.alone_1,
                    f.alone_k, f.beside_k, rel_alone, beside_alone, f.exact ? "true" : "false");
      else
        std::printf("%-9s %6lld %8d %5s %10.0f %8.2f %10.0f %10.0f %10.0f %10.2f %12.2f %6s\n", b.c_str(),
                    (long long)f.held, claimers, load_s.c_str(), f.release_per_s, f.release_seconds, f.alone_1,
                    f.alone_k, f.beside_k, rel_alone, beside_alone, f.exact ? "yes" : "NO");
      std::fflush(stdout);
    }
  if (!json)
    std::printf("\nreleased/s: held requests of prize p decided by `fuse unblock` (each granted and delivered through the\n"
                "ledger), with K claimers of prize q of the same activity running beside it (the same budget row),\n"
                "offering `load` of the claims per second they make alone (max: as many as they can, closed loop).\n"
                "alone: Engine::claim, one request per transaction, 1 and K workers, no release running.\n"
                "rel/alone1: the release against claiming each request again one at a time; beside/alone: the\n"
                "claimers' pace during the release against their pace alone. exact: every held user has exactly\n"
                "one delivered grant and nothing is left pending.\n");
  return all_exact ? 0 : 1;
}
