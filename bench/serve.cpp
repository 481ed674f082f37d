// bench/serve: claims per second of `rewardctl serve` over HTTP/1.1 with keep-alive, against the
// in-process Engine::claim on the same database and activity, measured in the same run, on SQLite
// and PostgreSQL, at 1 and 16 connections; and against one `rewardctl claim` process per request.
//   in-process: N threads, each with its own store and Engine, calling Engine::claim
//   http:       the binary's `serve --no-auth --threads 16`, driven by N httplib::Client threads, one
//               keep-alive connection each, POST /v1/claims; p50/p99 of the requests
//   process:    `rewardctl claim` started once per request, one after another
// Every request has a user and a biz id of its own (no replays; a direct activity with no per-user
// limit, one prize in 16 stock buckets, delivered through the ledger). In-process and HTTP alternate
// in two rounds per cell, so that a load change on the machine hits both alike; each round starts
// with a warm-up, not timed. CPU per claim: of this process (the engine in-process, the client
// over HTTP), of the server process and of PostgreSQL (its postmaster's processes, when it runs on this
// machine). At the end the database must hold exactly one grant per granted answer of each kind, or
// the bench prints a FAIL line and exits 1. Goals (the issue): http / in-process >= 0.7 on PostgreSQL
// at 16 connections, >= 0.5 on SQLite; http / process >= 20.
//
//   bench/serve [--seconds S] [--pg CONNINFO] [--no-pg] [--no-sqlite] [--log-level L] [--bin PATH] [-o json]
// --log-level: the server's (default info: one line per request, to a file, as a service logs).
// PostgreSQL: --pg, else $REWARDCTL_BENCH_PG, else $REWARDCTL_TEST_PG (or start one with scripts/pgtmp.sh).
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/activity/activity.hpp"
#include "core/engine/engine.hpp"
#include "core/store/migrate.hpp"

extern char** environ;
using namespace rc;
using Clk = std::chrono::steady_clock;
using Op = std::function<bool(int64_t)>;  // request i: true when granted

namespace {

double g_seconds = 3.0;
std::string g_bin = REWARDCTL_BIN, g_dir;
pid_t g_postmaster = 0;  // PostgreSQL on this machine: its postmaster (0: its CPU is not measured)

const char* kDefinition =
    "code = \"bench\"\nname = \"bench\"\nkind = \"direct\"\ntimezone = \"UTC\"\n"
    "start = \"2020-01-01T00:00:00Z\"\nend = \"2099-01-01T00:00:00Z\"\n"
    "[items.coupon]\nkind = \"coupon\"\nunit_cost_cents = 100\nchannel = \"ledger\"\n"
    "[[prizes]]\ncode = \"p\"\nitem = \"coupon\"\namount = 1\nstock = 1000000000\nstock_buckets = 16\n";

// CPU time (user + system) in microseconds: this process, or another one from /proc (*ppid: its parent).
double cpu_us(pid_t pid = 0, pid_t* ppid = nullptr) {
  if (!pid) {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  }
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), {}), x;
  if (s.empty()) return 0;
  std::istringstream in(s.substr(s.rfind(')') + 2));  // from field 3 (state): ppid, ..., utime (14), stime
  double ut = 0, st = 0;
  pid_t parent = 0;
  in >> x >> parent;
  for (int i = 5; i <= 13; ++i) in >> x;
  in >> ut >> st;
  if (ppid) *ppid = parent;
  return (ut + st) * 1e6 / double(sysconf(_SC_CLK_TCK));
}
double pg_cpu_us() {  // the postmaster and its children (backends, writers)
  if (!g_postmaster) return 0;
  double sum = cpu_us(g_postmaster);
  for (auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string n = e.path().filename();
    pid_t parent = 0;
    if (n.find_first_not_of("0123456789") == std::string::npos) {
      double us = cpu_us(pid_t(std::stol(n)), &parent);
      if (parent == g_postmaster) sum += us;
    }
  }
  return sum;
}

struct Target {
  std::string name, url, schema;
};

std::unique_ptr<store::Store> open(const std::string& url, bool create = false) {
  store::StoreOptions o;  // the defaults serve runs with (db.busy_timeout_ms, db.retries)
  o.create_if_missing = create;
  return store::open_store(store::parse_dsn(url, "bench"), o);
}

// A fresh database (SQLite file / PostgreSQL schema), migrated, with the activity live.
Target fresh(const std::string& backend, const std::string& pg) {
  Target t{backend, "sqlite:" + g_dir + "/serve.db", ""};
  if (backend == "postgres") {
    t.schema = "bench_serve_" + std::to_string(getpid());
    auto s = store::open_postgres(pg, {});
    s->exec("DROP SCHEMA IF EXISTS " + t.schema + " CASCADE");
    s->exec("CREATE SCHEMA " + t.schema);
    t.url = pg + " options='-c search_path=" + t.schema + "'";
    pid_t be = pid_t(s->autocommit().query("SELECT pg_backend_pid()", {})[0].i64(0)), parent = 0;
    std::string comm;
    if (std::ifstream("/proc/" + std::to_string(be) + "/comm") >> comm && comm == "postgres") cpu_us(be, &parent);
    g_postmaster = parent > 1 ? parent : 0;
  }
  auto s = open(t.url, true);
  store::migrate(*s, 0);
  auto parsed = activity::parse_definition(kDefinition, "bench");
  if (!parsed.def) throw std::runtime_error("bench definition does not parse");
  activity::create(*s, *parsed.def, kDefinition, {true, false}, {"bench", false}, 0);
  return t;
}

// The timed part of one or more rounds: granted requests, seconds, their ms, CPU.
struct Result {
  int64_t ok = 0, failed = 0;
  double secs = 0, self_cpu = 0, server_cpu = 0, pg_cpu = 0;
  std::vector<float> ms;
  double per_s() const { return secs > 0 ? double(ok) / secs : 0; }
  double per_claim(double us) const { return ok ? us / double(ok) : 0; }
  double pct(double p) {
    if (ms.empty()) return 0;
    auto k = long(p * double(ms.size() - 1));
    std::nth_element(ms.begin(), ms.begin() + k, ms.end());
    return ms[size_t(k)];
  }
  void add(const Result& r) {
    ok += r.ok, failed += r.failed, secs += r.secs, self_cpu += r.self_cpu, server_cpu += r.server_cpu, pg_cpu += r.pg_cpu;
    ms.insert(ms.end(), r.ms.begin(), r.ms.end());
  }
};

// `workers` threads, each running setup(w)'s op: a warm-up (every worker's first request done, then
// 0.3 s: serve's listen backlog is 5, and a connection that overflowed it waits for TCP to retry), then
// `secs` timed, where a request counts when it started and ended inside the window. *granted counts
// every grant (warm-up too).
Result measure(int workers, double secs, pid_t server, std::atomic<int64_t>* granted, std::function<Op(int)> setup) {
  std::atomic<int> phase{0}, first{0};  // phase 0 warm-up, 1 timed, 2 stop
  std::vector<Result> part(static_cast<size_t>(workers));
  std::vector<std::thread> ts;
  for (int w = 0; w < workers; ++w)
    ts.emplace_back([&, w] {
      Op op = setup(w);
      Result& r = part[size_t(w)];
      for (int64_t i = 0; phase < 2; ++i) {
        const int ph = phase;
        auto t0 = Clk::now();
        bool ok = false;
        try {
          ok = op(i);
        } catch (const std::exception& e) {
          if (r.failed < 3) std::fprintf(stderr, "bench worker error: %s\n", e.what());
        }
        if (ok) ++*granted;
        if (i == 0) ++first;
        if (ph != 1 || phase != 1) continue;
        if (!ok) ++r.failed;
        else r.ok++, r.ms.push_back(std::chrono::duration<float, std::milli>(Clk::now() - t0).count());
      }
    });
  while (first < workers) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Result all;
  const double c0 = cpu_us(), s0 = server ? cpu_us(server) : 0, p0 = pg_cpu_us();
  auto t0 = Clk::now();
  phase = 1;
  std::this_thread::sleep_for(std::chrono::duration<double>(secs));
  phase = 2;
  all.secs = std::chrono::duration<double>(Clk::now() - t0).count();
  all.self_cpu = cpu_us() - c0;
  all.server_cpu = server ? cpu_us(server) - s0 : 0;
  all.pg_cpu = pg_cpu_us() - p0;
  for (auto& t : ts) t.join();
  for (auto& r : part) all.add(r);  // (the workers' secs and CPU are 0: the window is the main thread's)
  return all;
}

Op engine_op(const Target& t, const Clock& clock, const std::string& prefix) {
  std::shared_ptr<store::Store> st = open(t.url);
  engine::EngineOptions o;
  o.actor = "bench";
  auto e = std::make_shared<engine::Engine>(*st, clock, o);
  return [st, e, prefix](int64_t i) {
    engine::ClaimRequest r;
    r.activity = "bench";
    r.user = r.biz_id = prefix + std::to_string(i);
    return e->claim(r).status == engine::Status::granted;
  };
}
Op http_op(int port, const std::string& prefix) {
  auto c = std::make_shared<httplib::Client>("127.0.0.1", port);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // else Nagle holds the body back behind the headers' unacknowledged segment
  c->set_read_timeout(30);
  return [c, prefix](int64_t i) {
    const std::string id = prefix + std::to_string(i);
    auto res = c->Post("/v1/claims", "{\"activity\":\"bench\",\"user\":\"" + id + "\",\"biz_id\":\"" + id + "\"}",
                       "application/json");
    if (!res) throw std::runtime_error("POST /v1/claims: " + httplib::to_string(res.error()));
    return res->status == 200 && res->body.compare(0, 10, "{\"code\":0,") == 0;  // keys sorted: code first
  };
}

// Starts argv, stdout to out_fd (or /dev/null), stderr appended to err_path.
pid_t spawn(const std::vector<std::string>& argv, int out_fd = -1, const std::string& err_path = "/dev/null") {
  std::vector<char*> a;
  for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  else posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_t pid = 0;
  if (posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ) != 0) {
    std::fprintf(stderr, "serve bench: cannot start %s\n", a[0]);
    std::exit(69);
  }
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}
int wait_rc(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// `rewardctl serve` on a free loopback port, read from its {"listening":"127.0.0.1:PORT"} line.
std::pair<pid_t, int> start_server(const Target& t, const std::string& level) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) std::exit(71);  // (dup2 onto the server's fd 1 clears it there)
  const std::string log = g_dir + "/serve-" + t.name + ".log";
  pid_t pid = spawn({g_bin, "--db", t.url, "--config", g_dir + "/serve.toml", "-o", "json", "--log-level", level, "serve",
                     "--listen", "127.0.0.1:0", "--threads", "16", "--no-auth"},
                    p[1], log);
  close(p[1]);
  std::string line;
  char c;
  while (read(p[0], &c, 1) == 1 && c != '\n') line += c;
  close(p[0]);  // (serve writes nothing more on stdout)
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object() || !j.contains("listening")) {
    std::fprintf(stderr, "serve bench: serve did not start (stdout '%s'); see %s\n", line.c_str(), log.c_str());
    std::exit(70);
  }
  const std::string addr = j["listening"];
  return {pid, std::atoi(addr.substr(addr.rfind(':') + 1).c_str())};
}

double ms3(double ms) { return std::round(ms * 1000) / 1000; }

void print_cell(bool json, const std::string& b, int conns, Result& eng, Result& http, const std::string& level) {
  const double ratio = eng.per_s() > 0 ? http.per_s() / eng.per_s() : 0;
  const double cli = http.per_claim(http.self_cpu), srv = http.per_claim(http.server_cpu);
  nlohmann::ordered_json j{{"backend", b}, {"connections", conns}, {"in_process_per_s", std::lround(eng.per_s())},
      {"http_per_s", std::lround(http.per_s())}, {"http_over_in_process", ms3(ratio)},
      {"p50_ms", ms3(http.pct(0.5))}, {"p99_ms", ms3(http.pct(0.99))}, {"in_process_p50_ms", ms3(eng.pct(0.5))},
      {"in_process_p99_ms", ms3(eng.pct(0.99))},
      {"cpu_us_per_claim", {{"in_process", std::lround(eng.per_claim(eng.self_cpu))},
                            {"in_process_pg", std::lround(eng.per_claim(eng.pg_cpu))}, {"client", std::lround(cli)},
                            {"server", std::lround(srv)}, {"http_pg", std::lround(http.per_claim(http.pg_cpu))}}},
      {"http_failed", http.failed}, {"server_log_level", level}};
  if (json) std::printf("%s\n", j.dump().c_str());
  else
    std::printf("%-9s %-16s %9.0f %8.0f %6.2f %7.2f %7.2f %7.2f %7.2f %11.0f %9.0f %8.0f\n", b.c_str(),
                conns == 1 ? "http, 1 conn" : "http, 16 conns", eng.per_s(), http.per_s(), ratio, http.pct(0.5),
                http.pct(0.99), eng.pct(0.5), eng.pct(0.99), eng.per_claim(eng.self_cpu + eng.pg_cpu),
                cli + srv + http.per_claim(http.pg_cpu), srv);
  if (http.failed) std::printf("  (%lld HTTP requests not granted in the timed window)\n", (long long)http.failed);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  std::string pg, level = "info";
  if (const char* e = std::getenv("REWARDCTL_BENCH_PG")) pg = e;
  else if (const char* e2 = std::getenv("REWARDCTL_TEST_PG")) pg = e2;
  bool do_pg = true, do_sqlite = true, json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) g_seconds = std::atof(argv[++i]);
    else if (a == "--pg" && i + 1 < argc) pg = argv[++i];
    else if (a == "--no-pg") do_pg = false;
    else if (a == "--no-sqlite") do_sqlite = false;
    else if (a == "--log-level" && i + 1 < argc) level = argv[++i];
    else if (a == "--bin" && i + 1 < argc) g_bin = argv[++i];
    else if ((a == "-o" || a == "--output") && i + 1 < argc && std::string(argv[i + 1]) == "json") json = (++i, true);
    else {
      std::fprintf(stderr, "usage: serve [--seconds S] [--pg CONNINFO] [--no-pg] [--no-sqlite] [--log-level L] "
                           "[--bin PATH] [-o json]\n");
      return 64;
    }
  }
  if (do_pg && pg.empty()) {
    std::fprintf(stderr, "serve: no PostgreSQL (give --pg, REWARDCTL_BENCH_PG or REWARDCTL_TEST_PG, or --no-pg)\n");
    return 69;
  }
  signal(SIGPIPE, SIG_IGN);
  char dtmpl[] = "/tmp/rcbench-serve.XXXXXX";
  g_dir = mkdtemp(dtmpl);
  // keep-alive connections are not closed every 1000 requests (the default) during a cell
  std::ofstream(g_dir + "/serve.toml") << "[serve]\nkeep_alive_max_requests = 1000000\n";
  std::vector<std::string> backends;
  if (do_sqlite) backends.push_back("sqlite");
  if (do_pg) backends.push_back("postgres");
  if (!json)
    std::printf("%-9s %-16s %9s %8s %6s %7s %7s %7s %7s %11s %9s %8s\n", "backend", "mode", "in-proc/s", "http/s",
                "ratio", "p50 ms", "p99 ms", "eng p50", "eng p99", "cpu in-proc", "cpu http", "cpu srv");
  int failures = 0;
  SystemClock clock;
  for (auto& b : backends) {
    const Target t = fresh(b, pg);
    const auto [server, port] = start_server(t, level);
    std::atomic<int64_t> eng_granted{0}, http_granted{0};
    double http_per_s[2] = {0, 0};
    for (int conns : {1, 16}) {
      Result eng, http;
      for (int round = 0; round < 2; ++round) {  // every round claims with biz ids of its own
        const std::string n = std::to_string(conns) + "_" + std::to_string(round) + "_";
        eng.add(measure(conns, g_seconds / 2, 0, &eng_granted,
                        [&](int w) { return engine_op(t, clock, "i" + n + std::to_string(w) + "_"); }));
        http.add(measure(conns, g_seconds / 2, server, &http_granted,
                         [&, port = port](int w) { return http_op(port, "h" + n + std::to_string(w) + "_"); }));
      }
      http_per_s[conns > 1] = http.per_s();
      print_cell(json, b, conns, eng, http, level);
    }
    // one `rewardctl claim` process per request, one after another
    int64_t proc_granted = 0, n = 0;
    auto t0 = Clk::now();
    while (std::chrono::duration<double>(Clk::now() - t0).count() < g_seconds) {
      const std::string id = "p_" + std::to_string(n++);
      proc_granted += wait_rc(spawn({g_bin, "--db", t.url, "--config", g_dir + "/serve.toml", "claim", "bench", "--user",
                                     id, "--biz-id", id})) == 0;
    }
    const double proc = double(proc_granted) / std::chrono::duration<double>(Clk::now() - t0).count();
    const double over1 = proc > 0 ? http_per_s[0] / proc : 0, over16 = proc > 0 ? http_per_s[1] / proc : 0;
    if (json)
      std::printf("{\"backend\":\"%s\",\"mode\":\"process per request\",\"process_per_s\":%.1f,"
                  "\"http_1_over_process\":%.1f,\"http_16_over_process\":%.1f}\n", b.c_str(), proc, over1, over16);
    else
      std::printf("%-9s %-16s %9.1f   http 1 conn / process: %.1f x, http 16 conns / process: %.1f x\n", b.c_str(),
                  "process/request", proc, over1, over16);
    std::fflush(stdout);
    kill(server, SIGTERM);
    if (int rc = wait_rc(server); rc != 0) {
      std::printf("FAIL %s: serve exited %d after SIGTERM (log %s/serve-%s.log)\n", b.c_str(), rc, g_dir.c_str(), b.c_str());
      ++failures;
    }
    // one grant per granted answer, of each kind
    auto st = open(t.url);
    for (auto [prefix, want] : {std::pair{"i", eng_granted.load()}, std::pair{"h", http_granted.load()},
                                std::pair{"p", proc_granted}}) {
      const int64_t have = st->autocommit()
          .query("SELECT count(*) FROM grants WHERE substr(biz_id, 1, 1) = $1", {std::string(prefix)})[0].i64(0);
      if (have != want) {
        std::printf("FAIL %s: %lld grants with biz ids '%s...' in the database, %lld granted answers\n", b.c_str(),
                    (long long)have, prefix, (long long)want);
        ++failures;
      }
    }
    st.reset();
    if (b == "postgres") store::open_postgres(pg, {})->exec("DROP SCHEMA IF EXISTS " + t.schema + " CASCADE");
  }
  if (!json)
    std::printf("\nratio = http/s / in-process/s (goal: PostgreSQL 16 conns >= 0.7, SQLite >= 0.5). p50/p99: the HTTP\n"
                "requests (ms); eng p50/p99: the in-process claims. cpu: CPU microseconds per claim - in-proc: the\n"
                "engine plus PostgreSQL; http: the client, the server process and PostgreSQL; srv: the server alone\n"
                "(its log level: %s). process/request: `rewardctl claim` per request, one after another (goal:\n"
                "http / process >= 20).\n", level.c_str());
  if (!failures) (void)!std::system(("rm -rf '" + g_dir + "'").c_str());
  return failures ? 1 : 0;
}
