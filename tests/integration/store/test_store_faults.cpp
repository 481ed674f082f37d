// Faults outside the program are not bugs (exit 70): a database this user may only read, a
// PostgreSQL backend terminated by an operator during an import, and SIGTERM while a batch's
// statement runs. Each exits with the code of its class (store/fault.hpp) and leaves a state that a
// rerun continues from.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/interrupt.hpp"
#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

// Starts rewardctl with args in the background (stdout/stderr to files in dir). Returns its pid.
pid_t spawn(const std::string& dir, const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    int out = open((dir + "/bg.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open((dir + "/bg.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    if (chdir(dir.c_str()) != 0) _exit(127);
    unsetenv("REWARDCTL_CONFIG");
    std::vector<std::string> a{REWARDCTL_BIN};
    a.insert(a.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Whether a running rewardctl catches SIGTERM (its handler is installed): SigCgt in /proc/PID/status,
// once the process is rewardctl (the fork runs with the test runner's own handlers until execv).
bool catches_sigterm(pid_t pid) {
  char exe[4096];
  ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1);
  if (n <= 0) return false;
  exe[n] = 0;
  char bin[4096];
  if (!realpath(REWARDCTL_BIN, bin) || std::string(exe) != bin) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGTERM - 1)) & 1;
  return false;
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string users_file(int n, const std::string& prefix = "u") {
  std::string body = "user_id\n";
  for (int i = 0; i < n; ++i) body += prefix + std::to_string(i) + "\n";
  return body;
}

// Polls until pred() holds (or the bound passes); returns whether it held.
bool wait_for(const std::function<bool()>& pred, int seconds = 120) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// How a child process meets SIGTERM with a store of its own (statement_under_sigterm).
enum class Meet {
  running,       // cancel_on_signal on (as opened): SIGTERM every 100 ms while a long statement runs
  spared,        // the same with cancel_on_signal(false)
  opened_spared, // the same, opened with StoreOptions::cancel_on_signal off (serve's sessions)
  idle_then_off  // on; one SIGTERM while the session is idle, 300 ms, off, then a statement
};

// In a child process (the signal flag is process-wide). Exit: 0 the statement completed (for
// running/spared: after at least one signal came while it ran), 130 it was stopped (Error
// interrupted), 3 no signal came while it ran (no verdict), 4 another error.
// REQUIRES: this process runs no other thread (ctest runs each case in a process of its own): the
// child must start the interrupt watcher itself, as a fork keeps no thread of its parent.
int statement_under_sigterm(const std::string& url, Meet meet) {
  const bool pg = is_pg();
  const std::string long_sql = pg ? "SELECT pg_sleep(4)"
                                  : "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000000) "
                                    "SELECT count(*) FROM c";
  const std::string short_sql = pg ? "SELECT pg_sleep(0.5)"
                                   : "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000) "
                                     "SELECT count(*) FROM c";
  pid_t pid = fork();
  if (pid == 0) {
    int code = 4;
    try {
      rc::install_interrupt_handlers();
      rc::store::StoreOptions o;
      o.create_if_missing = true;
      o.cancel_on_signal = meet != Meet::opened_spared;
      auto st = rc::store::open_store(rc::store::parse_dsn(url, "test"), o);
      if (meet == Meet::idle_then_off) {
        kill(getpid(), SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        st->cancel_on_signal(false);
        st->query(short_sql);
        _exit(0);
      }
      if (meet == Meet::spared) st->cancel_on_signal(false);
      std::atomic<bool> done{false};
      std::atomic<int> raised{0};
      std::thread t([&] {
        while (!done) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          if (done) break;
          ++raised;
          kill(getpid(), SIGTERM);
        }
      });
      try {
        st->query(long_sql);
        code = raised > 0 ? 0 : 3;
      } catch (const rc::Error& e) {
        code = e.kind() == rc::Errc::interrupted ? 130 : 4;
      }
      done = true;
      t.join();
    } catch (...) {
      code = 4;
    }
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return exit_code(status);
}

size_t threads_of_this_process() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) n += e.is_directory();
  return n;
}

}  // namespace

TEST_CASE("faults: SIGTERM stops a store's statement in progress, and not once cancel_on_signal is off or opened off") {
  // (before any store of this process: see statement_under_sigterm)
  REQUIRE_MESSAGE(threads_of_this_process() == 1,
                  "run this case in a process of its own (ctest does): a forked child needs its own signal watcher");
  const char* pg = std::getenv("REWARDCTL_TEST_PG");
  const std::string url = is_pg() ? std::string(pg ? pg : "") : "sqlite:" + make_temp_dir() + "/sigterm.db";
  REQUIRE(!url.empty());
  // on (as opened): the statement is stopped and its error says interrupted
  CHECK(statement_under_sigterm(url, Meet::running) == 130);
  // off (a job's record after its work stopped on a signal): the same statement runs to its end
  // through every signal
  CHECK(statement_under_sigterm(url, Meet::spared) == 0);
  // opened with it off (a serve worker's session): no signal ever stops its statements
  CHECK(statement_under_sigterm(url, Meet::opened_spared) == 0);
  // a cancel that reached the session while it was idle (the work's last statement had ended) stops
  // nothing after cancel_on_signal(false) returned
  CHECK(statement_under_sigterm(url, Meet::idle_then_off) == 0);
}

TEST_CASE("faults: a database this user may only read - reads work, writes exit 77 naming why, nothing written") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  auto g = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1", "-o", "json"});
  const std::string code = json::parse(g.out)["record_code"];

  std::function<Run(std::vector<std::string>)> as_reader;
  std::function<void()> restore = [] {};
  std::string why;  // what the refusal must name
  if (is_pg()) {
    // a role that may read every table of the test's schema, and write none
    auto st = db.open();
    const std::string schema = st->query("SELECT current_schema()")[0].str(0);
    const std::string role = "ro_" + schema;
    st->exec("CREATE ROLE " + role + " LOGIN");
    st->exec("GRANT USAGE ON SCHEMA " + schema + " TO " + role);
    st->exec("GRANT SELECT ON ALL TABLES IN SCHEMA " + schema + " TO " + role);
    restore = [&db, role] {
      auto s = db.open();
      s->exec("DROP OWNED BY " + role);
      s->exec("DROP ROLE " + role);
    };
    const std::string url = db.url() + " user=" + role;
    as_reader = [url, &db](std::vector<std::string> args) {
      args.insert(args.begin(), {"--db", url});
      return run(args, {}, "", db.dir());
    };
    why = "42501";
  } else {
    // another owner's file, mode 644, in a directory this user cannot write (no -shm can be made)
    const std::string file = db.dir() + "/test.db";
    if (geteuid() == 0) {
      chmod(db.dir().c_str(), 0755);
      chmod(file.c_str(), 0644);
      as_reader = [&db](std::vector<std::string> args) { return db.rc_as(65534, args); };
    } else {
      chmod(file.c_str(), 0444);
      chmod(db.dir().c_str(), 0555);
      restore = [&db] { chmod(db.dir().c_str(), 0700); };
      as_reader = [&db](std::vector<std::string> args) { return db.rc(args); };
    }
    why = "read-only";
  }

  for (auto args : std::vector<std::vector<std::string>>{{"db", "status"},
                                                         {"record", "show", code},
                                                         {"record", "show", "--user", "u1"},
                                                         {"activity", "list"},
                                                         {"activity", "show", "act"},
                                                         {"ledger", "balance", "u1"},
                                                         {"qualification", "count", "act"}}) {
    auto r = as_reader(args);
    CAPTURE(args[0] + " " + args[1]);
    INFO(r.all());
    CHECK(r.rc == 0);
    if (args[1] == "show" && args[0] == "record") CHECK(r.out.find(code) != std::string::npos);
  }
  for (auto args : std::vector<std::vector<std::string>>{{"claim", "act", "--user", "u2", "--biz-id", "b2"},
                                                         {"reverse", code, "--reason", "test", "--yes"},
                                                         {"activity", "pause", "act"}}) {
    auto r = as_reader(args);
    CAPTURE(args[0]);
    INFO(r.all());
    CHECK(r.rc == 77);
    CHECK(r.err.find(why) != std::string::npos);
    if (is_pg()) CHECK(r.err.find("permission denied for table") != std::string::npos);
    else CHECK(r.err.find("test.db") != std::string::npos);
  }
  restore();
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 1);
  CHECK(db.count("SELECT count(*) FROM activity WHERE state = 'live'") == 1);
}

TEST_CASE("faults: a PostgreSQL backend terminated during a batched import exits 69, and a rerun resumes") {
  if (!is_pg()) {
    MESSAGE("PostgreSQL only: SQLite has no server backend to terminate");
    return;
  }
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  const int n = 400000;
  write_file(db.dir(), "big.csv", users_file(n));
  const std::string app = "rc_term_" + std::to_string(getpid()) + "_" + std::to_string(rand() % 100000);
  pid_t pid = spawn(db.dir(), {"--db", db.url() + " application_name=" + app, "import-qualifications", "act",
                               "big.csv", "--batch-size", "10000", "--progress", "none", "-o", "json"});
  // once a batch has committed, an operator terminates the backend
  bool started = wait_for([&] {
    return db.count("SELECT coalesce(max(rows_committed), 0) FROM import_run WHERE state = 'running'") >= 10000;
  });
  int64_t killed = started ? db.count("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                      "WHERE application_name = $1",
                                      {app})
                           : 0;
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string err = read_file(db.dir() + "/bg.err");
  INFO(err);
  REQUIRE(started);
  REQUIRE(killed == 1);
  CHECK(exit_code(status) == 69);
  CHECK(err.find("internal error") == std::string::npos);
  // the server's reason, not libpq's "not connected": on stderr and in the run's record
  CHECK(err.find("57P01") != std::string::npos);
  CHECK(err.find("terminating connection due to administrator command") != std::string::npos);
  CHECK(err.find("client encoding") == std::string::npos);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE job = 'import-qualifications' AND state = 'failed' AND "
                 "error LIKE '%57P01: terminating connection due to administrator command%'") == 1);
  const int64_t committed = db.count("SELECT rows_committed FROM import_run WHERE state = 'running'");
  CHECK(committed > 0);
  CHECK(committed < n);

  auto r = db.ok({"import-qualifications", "act", "big.csv", "--batch-size", "10000", "--progress", "none", "-o", "json"});
  auto j = json::parse(lines(r.out).back());
  CHECK(j["resumed_from"] == committed);
  CHECK(j["inserted"] == n);
  CHECK(db.count("SELECT count(*) FROM qualification") == n);
  CHECK(db.count("SELECT count(*) FROM import_run WHERE state = 'running'") == 0);
}

TEST_CASE("faults: a PostgreSQL session terminated while idle or inside a transaction reports the server's SQLSTATE and words, and the store reconnects") {
  if (!is_pg()) {
    MESSAGE("PostgreSQL only: SQLite has no server session to terminate");
    return;
  }
  TestDb db;
  db.migrate();
  auto st = db.open();
  auto backend_pid = [](rc::store::Session& s) { return s.query("SELECT pg_backend_pid()", {}).rows.at(0).i64(0); };
  auto terminate = [&](int64_t pid) {
    return db.count("SELECT count(*) FROM (SELECT pg_terminate_backend($1::int) AS t) x WHERE t", {pid});
  };
  auto expect_lost = [](const rc::Error& e) {
    INFO(std::string(e.what()));
    CHECK(e.kind() == rc::Errc::unavailable);
    CHECK(std::string(e.what()).find("client encoding") == std::string::npos);
    if (!is_pooled()) {
      CHECK(std::string(e.what()).find("PostgreSQL error 57P01: terminating connection due to administrator command") !=
            std::string::npos);
      CHECK(std::string(e.what()).find("the server ended this session") != std::string::npos);
    } else {
      // PgBouncer ends the client's connection with words of its own
      CHECK(std::string(e.what()).find("PostgreSQL") != std::string::npos);
    }
  };
  if (!is_pooled()) {  // (behind the pooler an idle client holds no server session to terminate)
    SUBCASE("idle between statements") {
      const int64_t pid = backend_pid(st->autocommit());
      REQUIRE(terminate(pid) == 1);
      bool threw = false;
      for (int i = 0; i < 50 && !threw; ++i) {  // (the session ends a moment after the call returns)
        try {
          st->autocommit().query("SELECT 1", {});
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        } catch (const rc::Error& e) {
          threw = true;
          expect_lost(e);
        }
      }
      CHECK(threw);
      // the next statement runs on a new session
      CHECK(backend_pid(st->autocommit()) != pid);
    }
  }
  SUBCASE("inside a transaction") {
    bool threw = false;
    int64_t pid = 0;
    try {
      st->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
        pid = backend_pid(tx);
        REQUIRE(terminate(pid) == 1);
        for (int i = 0; i < 50; ++i) {
          tx.query("SELECT 1", {});
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      });
    } catch (const rc::Error& e) {
      threw = true;
      expect_lost(e);
    }
    CHECK(threw);
    CHECK(backend_pid(st->autocommit()) != pid);
  }
}

TEST_CASE("faults: a PostgreSQL server with no connection slot for the role refuses with 53300's class and hint, exit 69") {
  if (!is_pg() || is_pooled()) {
    MESSAGE("PostgreSQL only, direct: the role limit is the server's (PgBouncer authenticates roles of its own list)");
    return;
  }
  TestDb db;
  db.migrate();
  const std::string role = "rc_nolimit_" + std::to_string(getpid()) + "_" + std::to_string(rand() % 100000);
  db.open()->autocommit().exec_script("CREATE ROLE " + role + " LOGIN CONNECTION LIMIT 0");
  auto r = run({"db", "status", "--db", db.url() + " user=" + role}, {}, "", db.dir());
  db.open()->autocommit().exec_script("DROP ROLE " + role);
  INFO(r.all());
  CHECK(r.rc == 69);
  CHECK(r.err.find("cannot connect to PostgreSQL") != std::string::npos);
  CHECK(r.err.find("too many connections for role") != std::string::npos);
  CHECK(r.err.find("53300") != std::string::npos);
  CHECK(r.err.find("no connection slot free") != std::string::npos);
  CHECK(r.err.find("check --db") == std::string::npos);
}

TEST_CASE("faults: a PostgreSQL server stopped (fast) and started again - 57P01 with the server's words, then the server named as down, then a new session") {
  if (!is_pg() || is_pooled()) {
    MESSAGE("PostgreSQL only, direct: the test stops a server of its own");
    return;
  }
  // a server of this test's own (the shared test server stays up for the other tests)
  const std::string script = std::string(REWARDCTL_SOURCE_DIR) + "/scripts/pgtmp.sh";
  auto started = run_program({"bash", "-c", ". '" + script + "' && pg_tmp_start >/dev/null && "
                                            "echo \"$PG_TMP_DSN\" && echo \"$PG_TMP_DIR\" && echo \"$PG_TMP_BIN\""});
  REQUIRE(started.rc == 0);
  const auto out = lines(started.out);
  REQUIRE(out.size() == 3);
  const std::string dsn = out[0], dir = out[1], bin = out[2];
  const std::string as = getuid() == 0 ? "runuser -u postgres -- " : "";
  auto pg_ctl = [&](const std::string& what) {
    return run_program({"bash", "-c", as + bin + "/pg_ctl -D " + dir + "/data -l " + dir + "/server.log -w -t 30 " + what})
        .rc;
  };
  struct Cleanup {
    std::function<void()> f;
    ~Cleanup() { f(); }
  } cleanup{[&] {
    pg_ctl("-m immediate stop");
    std::filesystem::remove_all(dir);
  }};
  auto st = rc::store::open_store(rc::store::parse_dsn(dsn, "test"), store_options());
  const int64_t pid = st->autocommit().query("SELECT pg_backend_pid()", {}).rows.at(0).i64(0);
  REQUIRE(pg_ctl("-m fast stop") == 0);
  try {
    st->autocommit().query("SELECT 1", {});
    FAIL("a statement on a stopped server succeeded");
  } catch (const rc::Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(e.kind() == rc::Errc::unavailable);
    CHECK(what.find("PostgreSQL error 57P01: terminating connection due to administrator command") != std::string::npos);
    CHECK(what.find("client encoding") == std::string::npos);
  }
  try {
    st->autocommit().query("SELECT 1", {});
    FAIL("a statement on a stopped server succeeded");
  } catch (const rc::Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(e.kind() == rc::Errc::unavailable);
    CHECK(what.find("cannot connect again") != std::string::npos);
    CHECK(what.find("08001: check that the server is up") != std::string::npos);
  }
  // (restart on a stopped server starts it with the options it last ran with, postmaster.opts)
  REQUIRE(pg_ctl("restart") == 0);
  CHECK(st->autocommit().query("SELECT pg_backend_pid()", {}).rows.at(0).i64(0) != pid);
}

TEST_CASE("faults: connecting to a PostgreSQL database that does not exist is a configuration error (78) naming it") {
  if (!is_pg() || is_pooled()) {
    MESSAGE("PostgreSQL only, direct: PgBouncer answers for its own list of databases");
    return;
  }
  TestDb db;
  auto r = run({"db", "status", "--db", db.url() + " dbname=rc_no_such_db"}, {}, "", db.dir());
  INFO(r.all());
  CHECK(r.rc == 78);
  CHECK(r.err.find("database \"rc_no_such_db\" does not exist") != std::string::npos);
  CHECK(r.err.find("3D000") != std::string::npos);
  CHECK(r.err.find("check dbname") != std::string::npos);
}

TEST_CASE("faults: SIGTERM while a batch's statement waits stops the import at once, the batch rolled back") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  const int n = 30000;
  write_file(db.dir(), "q.csv", users_file(n));
  // a lock wait far longer than the test: only a cancelled statement ends it early
  std::string cfg = write_file(db.dir(), "rewardctl.toml", "[db]\nbusy_timeout_ms = 600000\nretries = 0\n");
  std::atomic<bool> locked{false}, release{false}, released_before_exit{false};
  std::thread holder([&] {
    auto st = db.open();
    st->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
      // SQLite: BEGIN IMMEDIATE holds the write lock; PostgreSQL: a lock every insert waits for
      if (is_pg()) tx.exec_script("LOCK TABLE qualification IN SHARE MODE");
      locked = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
  });
  while (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string app = "rc_sigterm_" + std::to_string(getpid()) + "_" + std::to_string(rand() % 100000);
  const std::string url = is_pg() ? db.url() + " application_name=" + app : db.url();
  pid_t pid = spawn(db.dir(), {"--config", cfg, "--db", url, "import-qualifications", "act", "q.csv",
                               "--batch-size", "10000", "--progress", "none", "-o", "json"});
  // the import is waiting inside its first batch: PostgreSQL shows its COPY waiting for the lock;
  // on SQLite it waits for the write lock from BEGIN on, so its signal handler being in place is
  // enough
  if (is_pg())
    CHECK(wait_for([&] {
      return db.count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                      "application_name = $1", {app}) > 0;
    }));
  else
    CHECK(wait_for([&] { return catches_sigterm(pid); }));
  kill(pid, SIGTERM);
  int status = 0;
  // the lock is released only if the import has not stopped on its own by then
  bool exited = wait_for([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 60);
  if (!exited) {
    released_before_exit = true;
    release = true;
    waitpid(pid, &status, 0);
  }
  release = true;
  holder.join();
  const std::string err = read_file(db.dir() + "/bg.err");
  INFO(err);
  CHECK_FALSE(released_before_exit);  // it stopped while the lock was still held
  CHECK(exit_code(status) == 130);
  CHECK(err.find("interrupted") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM qualification") == 0);
  // a rerun imports everything
  db.ok({"import-qualifications", "act", "q.csv", "--batch-size", "10000", "--progress", "none"});
  CHECK(db.count("SELECT count(*) FROM qualification") == n);
}

TEST_CASE("faults: SIGTERM after committed work - import and list-issue record this run's counts, exit 130") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 20000;
  seed(db, s);
  auto job_counts = [&](const std::string& job) {
    auto st = db.open();
    auto r = st->query("SELECT state, counts, exit_code FROM job_run WHERE job = $1 ORDER BY id DESC", {job});
    REQUIRE(!r.empty());
    CHECK(r[0].str(0) == "interrupted");
    CHECK(r[0].i64(2) == 130);
    return json::parse(r[0].str(1));
  };

  SUBCASE("import-qualifications with --batch-size") {
    const int n = 300000;
    write_file(db.dir(), "q.csv", users_file(n));
    pid_t pid = spawn(db.dir(), {"--db", db.url(), "import-qualifications", "act", "q.csv", "--batch-size", "5000",
                                 "--progress", "none", "-o", "json"});
    CHECK(wait_for([&] { return db.count("SELECT coalesce(max(rows_committed), 0) FROM import_run") >= 5000; }));
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(exit_code(status) == 130);
    const int64_t committed = db.count("SELECT count(*) FROM qualification");
    CHECK(committed > 0);
    CHECK(committed < n);
    CHECK(job_counts("import-qualifications")["inserted"] == committed);
    auto out = json::parse(read_file(db.dir() + "/bg.out"));
    CHECK(out["interrupted"] == true);
    CHECK(out["inserted"] == committed);
    // the same command continues; this run's counts are its own work, not the total
    auto r = db.ok({"import-qualifications", "act", db.dir() + "/q.csv", "--batch-size", "5000"});
    CHECK(db.count("SELECT count(*) FROM qualification") == n);
    auto st = db.open();
    auto last = st->query("SELECT counts FROM job_run WHERE job = 'import-qualifications' ORDER BY id DESC");
    CHECK(json::parse(last[0].str(0))["inserted"] == n - committed);
  }
  SUBCASE("list-issue run with two workers") {
    write_file(db.dir(), "l.csv", users_file(20000));
    auto plan = json::parse(lines(db.ok({"list-issue", "plan", "act", db.dir() + "/l.csv", "--prize", "p1", "-o", "json",
                                         "--operator", "alice"}).out).back());
    const std::string b = plan["batch"];
    db.ok({"list-issue", "approve", b, "--operator", "bob"});
    pid_t pid = spawn(db.dir(), {"--db", db.url(), "list-issue", "run", b, "--workers", "2", "--chunk", "200",
                                 "--progress", "none", "-o", "json"});
    CHECK(wait_for([&] { return db.count("SELECT count(*) FROM list_item WHERE state = 'issued'") >= 400; }));
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(exit_code(status) == 130);
    const int64_t issued = db.count("SELECT count(*) FROM list_item WHERE state = 'issued'");
    CHECK(issued < 20000);
    CHECK(job_counts("list-issue")["issued"] == issued);
    auto out = json::parse(read_file(db.dir() + "/bg.out"));
    CHECK(out["interrupted"] == true);
    CHECK(out["issued"] == issued);
    CHECK(db.count("SELECT count(*) FROM grants") == issued);
  }
}

TEST_CASE("faults: a statement bound with the wrong number of parameters is our bug (70), not a lost database (69)") {
  TestDb db;
  db.migrate();
  auto st = db.open();
  for (const rc::store::Params& p : {rc::store::Params{int64_t(1), int64_t(2)}, rc::store::Params{}}) {
    CAPTURE(p.size());
    try {
      st->query("SELECT count(*) FROM grants WHERE id = $1", p);
      FAIL("a statement with " << p.size() << " parameter(s) for one ran");
    } catch (const rc::Error& e) {
      INFO(e.what());
      CHECK(e.kind() == rc::Errc::internal);
      CHECK(rc::exit_code(e.kind()) == rc::Exit::internal);
    }
  }
  CHECK(st->query("SELECT count(*) FROM grants WHERE id = $1", {int64_t(1)})[0].i64(0) == 0);  // the store still works
}
