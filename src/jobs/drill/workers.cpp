// drill's worker processes: the parent's side (run_workers) and the child's (worker_main). The
// protocol and its guarantees: drill_workers.hpp.
#include "jobs/drill/workers.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/engine/engine.hpp"
#include "core/interrupt.hpp"

namespace rc::jobs::drill {
namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

constexpr auto kConnectTimeout = std::chrono::seconds(120);
constexpr auto kWorkTimeout = std::chrono::seconds(600);

// One child: its pid, the write end of its stdin (a socket: send() with MSG_NOSIGNAL cannot raise
// SIGPIPE in the drill when the child is already gone), the read end of its stdout.
struct Child {
  pid_t pid = -1;
  int in = -1, out = -1;
  std::string buf;  // what it wrote so far
  bool eof = false;
  int status = 0;
  bool reaped = false;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Waits for a child that closed its stdout; SIGKILL after `grace` (it never hangs the drill).
void reap(Child& c, std::chrono::milliseconds grace) {
  if (c.reaped || c.pid <= 0) return;
  const auto until = steady::now() + grace;
  for (;;) {
    const pid_t r = ::waitpid(c.pid, &c.status, WNOHANG);
    if (r == c.pid || (r < 0 && errno != EINTR)) break;
    if (steady::now() >= until) {
      ::kill(c.pid, SIGKILL);
      while (::waitpid(c.pid, &c.status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  c.reaped = true;
}

// Every child ends with the drill's call: killed when still running, always reaped.
struct Children {
  std::vector<Child> v;
  ~Children() {
    for (auto& c : v)
      if (!c.reaped && c.pid > 0) ::kill(c.pid, SIGKILL);
    for (auto& c : v) {
      reap(c, std::chrono::milliseconds(0));
      close_fd(c.in);
      close_fd(c.out);
    }
  }
};

Child spawn(const WorkerTask& t) {
  int in[2], out[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0)
    throw Error(Errc::internal, std::string("drill workers: socketpair: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    throw Error(Errc::internal, std::string("drill workers: pipe: ") + std::strerror(errno));
  }
  // everything the child needs is prepared before fork: between fork and exec the child (a copy of
  // a process that may run other threads) only makes async-signal-safe calls
  static char exe[] = "/proc/self/exe", arg0[] = "rewardctl", arg1[] = "__drill-worker";
  char* argv[] = {arg0, arg1, nullptr};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    throw Error(Errc::internal, std::string("drill workers: fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    // the child: a drill that dies (even by kill -9) takes its workers with it
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (::dup2(in[1], 0) < 0 || ::dup2(out[1], 1) < 0) ::_exit(127);
    ::syscall(SYS_close_range, 3U, ~0U, 0U);  // nothing else of the drill's (connections, files)
    ::execv(exe, argv);
    ::_exit(127);
  }
  ::close(in[1]);
  ::close(out[1]);
  Child c;
  c.pid = pid;
  c.in = in[0];
  c.out = out[0];
  ::fcntl(c.out, F_SETFL, O_NONBLOCK);
  json j{{"check", t.check},   {"dialect", t.dsn.dialect == store::Dialect::postgres ? "postgres" : "sqlite"},
         {"target", t.dsn.target}, {"pooled", t.pooled}, {"code", t.code}, {"now", t.now}, {"operator", t.operator_name},
         {"worker", t.worker}, {"claims", t.claims}, {"seconds", t.seconds}, {"user", t.user}, {"biz", t.biz},
         {"prizes", t.prizes}};
  const std::string line = j.dump() + "\n";
  // a child that died at once is found by the reading loop (EOF); the send may fail then
  (void)::send(c.in, line.data(), line.size(), MSG_NOSIGNAL);
  return c;
}

// The lines a child wrote: "ready PID", then one JSON object (anything else, e.g. a stray log
// line, is ignored).
bool has_ready(const Child& c) { return c.buf.rfind("ready ", 0) == 0 && c.buf.find('\n') != std::string::npos; }
std::optional<json> result_of(const Child& c) {
  size_t p = 0;
  while (p < c.buf.size()) {
    size_t e = c.buf.find('\n', p);
    if (e == std::string::npos) break;
    const std::string l = c.buf.substr(p, e - p);
    if (!l.empty() && l[0] == '{') {
      auto j = json::parse(l, nullptr, false);
      if (!j.is_discarded()) return j;
    }
    p = e + 1;
  }
  return std::nullopt;
}

std::string status_text(int status) {
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + ::strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended (wait status " + std::to_string(status) + ")";
}

// Reads what the children write until done(c) holds for all of them. Returns the index of a child
// that reached EOF without done(c) (it died or gave up), or -1. Throws Error(interrupted) on a
// signal and Error(internal) at the deadline (naming the children that did not answer).
int pump(Children& cs, steady::time_point deadline, const char* phase, bool (*done)(const Child&)) {
  for (;;) {
    check_interrupted();
    std::vector<pollfd> fds;
    std::vector<size_t> who;
    bool all = true;
    for (size_t i = 0; i < cs.v.size(); ++i) {
      auto& c = cs.v[i];
      if (done(c)) continue;
      all = false;
      if (c.eof) return int(i);
      fds.push_back({c.out, POLLIN, 0});
      who.push_back(i);
    }
    if (all) return -1;
    const auto now = steady::now();
    if (now >= deadline) {
      std::string late;
      for (auto i : who) late += (late.empty() ? "" : ", ") + std::to_string(i) + " (pid " + std::to_string(cs.v[i].pid) + ")";
      throw Error(Errc::internal, std::string("worker(s) ") + late + " did not " + phase + " in time; all workers were stopped");
    }
    const int ms = int(std::min<int64_t>(100, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1));
    const int n = ::poll(fds.data(), fds.size(), ms);
    if (n < 0 && errno != EINTR) throw Error(Errc::internal, std::string("drill workers: poll: ") + std::strerror(errno));
    for (size_t k = 0; n > 0 && k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      auto& c = cs.v[who[k]];
      char b[4096];
      for (;;) {
        const ssize_t r = ::read(c.out, b, sizeof b);
        if (r > 0) {
          c.buf.append(b, size_t(r));
          continue;
        }
        if (r == 0) c.eof = true;
        else if (errno == EINTR) continue;
        break;
      }
    }
  }
}

bool ready(const Child& c) { return has_ready(c); }
bool reported(const Child& c) { return c.eof && result_of(c).has_value(); }

[[noreturn]] void fail_worker(Children& cs, int i, const char* when) {
  auto& c = cs.v[size_t(i)];
  reap(c, std::chrono::milliseconds(5000));
  check_interrupted();  // a Ctrl-C reaches the workers too: that is an interruption, not a failure
  if (auto j = result_of(c); j && j->contains("error"))  // it gave up with an error of its own
    throw Error(errc_from_name(j->value("kind", "")).value_or(Errc::internal),
                "worker " + std::to_string(i) + ": " + (*j)["error"].get<std::string>());
  throw Error(Errc::internal, "worker " + std::to_string(i) + " (pid " + std::to_string(c.pid) + ") of " +
                                  std::to_string(cs.v.size()) + " " + status_text(c.status) + " " + when +
                                  "; the other workers were stopped");
}

std::string fill(std::string s, int w, int64_t i) {
  for (auto [k, v] : {std::pair<const char*, std::string>{"{w}", std::to_string(w)}, {"{i}", std::to_string(i)}})
    for (size_t p; (p = s.find(k)) != std::string::npos;) s.replace(p, 3, v);
  return s;
}

}  // namespace

std::map<std::string, int64_t> WorkersRun::outcomes() const {
  std::map<std::string, int64_t> m;
  for (auto& w : workers)
    for (auto& [k, n] : w.outcomes) m[k] += n;
  return m;
}

int64_t WorkersRun::distinct_pids() const {
  std::set<int64_t> s;
  for (auto& w : workers) s.insert(w.pid);
  return int64_t(s.size());
}

WorkersRun run_workers(const std::vector<WorkerTask>& tasks) {
  Children cs;
  for (size_t i = 0; i < tasks.size(); ++i) {
    WorkerTask t = tasks[i];
    t.worker = int(i);
    cs.v.push_back(spawn(t));
  }
  double work_seconds = 0;
  for (auto& t : tasks) work_seconds = std::max(work_seconds, t.seconds);
  // 1. every worker connected and waiting at the barrier
  if (int i = pump(cs, steady::now() + kConnectTimeout, "connect", ready); i >= 0)
    fail_worker(cs, i, "before it was ready");
  // 2. the start: EOF on every worker's stdin at once
  const auto t0 = steady::now();
  for (auto& c : cs.v) close_fd(c.in);
  const auto deadline = t0 + kWorkTimeout + std::chrono::milliseconds(int64_t(work_seconds * 1000));
  if (int i = pump(cs, deadline, "finish", reported); i >= 0) fail_worker(cs, i, "before it reported");
  WorkersRun run;
  run.seconds = std::chrono::duration<double>(steady::now() - t0).count();
  for (auto& c : cs.v) reap(c, std::chrono::milliseconds(10000));
  for (size_t i = 0; i < cs.v.size(); ++i) {
    const json j = *result_of(cs.v[i]);
    if (j.contains("error"))
      throw Error(errc_from_name(j.value("kind", "")).value_or(Errc::internal),
                  "worker " + std::to_string(i) + ": " + j["error"].get<std::string>());
    WorkerResult r;
    r.pid = j.at("pid").get<int64_t>();
    r.claims = j.at("claims").get<int64_t>();
    r.outcomes = j.at("outcomes").get<std::map<std::string, int64_t>>();
    run.workers.push_back(std::move(r));
  }
  return run;
}

int worker_main() {
  // logs never go to stdout, the protocol's channel
  spdlog::set_default_logger(spdlog::stderr_color_mt("drill-worker", spdlog::color_mode::never));
  spdlog::set_level(spdlog::level::warn);
  auto say = [](const json& j) { std::cout << j.dump() << std::endl; };
  try {
    const std::string not_a_task = "__drill-worker is internal to rewardctl drill: standard input is not a drill task";
    std::string line;
    if (!std::getline(std::cin, line)) throw Error(Errc::usage, not_a_task);
    WorkerTask t;
    try {
      const json j = json::parse(line);
      t.check = j.at("check").get<std::string>();
      t.dsn = store::Dsn{j.at("dialect") == "postgres" ? store::Dialect::postgres : store::Dialect::sqlite,
                         j.at("target").get<std::string>()};
      t.pooled = j.value("pooled", false);
      t.code = j.at("code").get<std::string>();
      t.now = j.at("now").get<Millis>();
      t.operator_name = j.at("operator").get<std::string>();
      t.worker = j.at("worker").get<int>();
      t.claims = j.at("claims").get<int64_t>();
      t.seconds = j.at("seconds").get<double>();
      t.user = j.at("user").get<std::string>();
      t.biz = j.at("biz").get<std::string>();
      t.prizes = j.at("prizes").get<std::vector<std::string>>();
    } catch (const json::exception&) {
      throw Error(Errc::usage, not_a_task);
    }
    store::StoreOptions so;
    so.busy_timeout_ms = 30000;
    so.retries = 20;
    so.pooled = t.pooled && t.dsn.dialect == store::Dialect::postgres;
    auto st = store::open_store(t.dsn, so);
    FixedClock clock(t.now);
    engine::EngineOptions eo;
    eo.actor = t.operator_name;
    eo.sold_out_memory_ms = 0;  // every sold-out answer comes from the database: the counts are exact
    engine::Engine e(*st, clock, eo);
    std::cout << "ready " << ::getpid() << std::endl;
    // the barrier: the drill closes every worker's stdin at once
    for (char b[64];;) {
      const ssize_t r = ::read(0, b, sizeof b);
      if (r == 0 || (r < 0 && errno != EINTR)) break;
    }
    const char* kill_hook = std::getenv("REWARDCTL_TEST_DRILL_KILL_WORKER");  // test-only
    const bool die = kill_hook && t.check == kill_hook && t.worker == 0;
    const auto until = steady::now() + std::chrono::milliseconds(int64_t(t.seconds * 1000));
    std::map<std::string, int64_t> outcomes;
    int64_t i = 0;
    for (; t.seconds > 0 ? steady::now() < until : i < t.claims; ++i) {
      engine::ClaimRequest r;
      r.activity = t.code;
      r.user = fill(t.user, t.worker, i);
      r.biz_id = fill(t.biz, t.worker, i);
      r.deliver = false;
      if (!t.prizes.empty()) r.prize = t.prizes[size_t((t.worker + i) % int64_t(t.prizes.size()))];
      auto c = e.claim(r);
      ++outcomes[c.status == engine::Status::rejected ? std::string("rejected:") + name(c.reason) : engine::status_name(c.status)];
      if (die) ::raise(SIGKILL);
    }
    say({{"pid", ::getpid()}, {"claims", i}, {"outcomes", outcomes}});
    return 0;
  } catch (const Error& e) {
    say({{"error", e.what()}, {"kind", errc_name(e.kind())}});
    return exit_int(exit_code(e.kind()));
  } catch (const std::exception& e) {
    say({{"error", std::string("internal error: ") + e.what()}, {"kind", errc_name(Errc::internal)}});
    return exit_int(Exit::internal);
  }
}

}  // namespace rc::jobs::drill
