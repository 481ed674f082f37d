// Many hosts on one database (docs/design.md §9): the database's clock decides on PostgreSQL (a
// host whose clock is days off is simulated with libfaketime in the child's environment), the
// host's on SQLite (one host, one clock); a bad pooler setting; a lease lost and taken over.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/harness.hpp"
#include "support/jobs.hpp"
#include "support/seed.hpp"

using json = nlohmann::json;
using rt::TestDb;

namespace {

// The environment of a host whose clock is `offset` off ("+2d", "-1h"): libfaketime, preloaded
// into the rewardctl child only (the database server keeps the true time). The monotonic clock
// stays true, so timeouts and backoff are not disturbed.
std::map<std::string, std::string> host(const std::string& offset) {
  return {{"LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"},
          {"FAKETIME", offset},
          {"FAKETIME_DONT_FAKE_MONOTONIC", "1"}};
}

rc::Millis real_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr rc::Millis kDay = 86'400'000;

}  // namespace

TEST_CASE("many hosts: a day limit across three hosts whose clocks are days apart grants exactly the limit") {
  TestDb db;
  db.migrate();
  rt::Spec s;
  s.timezone = "UTC";
  s.limit = 1;
  s.period = "day";
  rt::seed(db, s);
  int granted = 0;
  for (auto off : {"-2d", "+0", "+2d"}) {
    CAPTURE(off);
    auto r = db.rc({"claim", "act", "--user", "u1", "--biz-id", std::string("b") + off, "-o", "json"}, host(off));
    REQUIRE((r.rc == 0 || r.rc == 1));
    if (r.rc == 0) ++granted;
    else CHECK(rt::last_json(r)["reason"] == "limit_reached");
    if (rt::is_pg() && std::string(off) != "+0") CHECK(r.err.find("the host's clock is") != std::string::npos);
  }
  if (rt::is_pg()) {
    // one day by the database's clock: one grant, stored at the database's time
    CHECK(granted == 1);
    CHECK(db.count("SELECT count(*) FROM grants WHERE user_id = 'u1'") == 1);
    const int64_t at = db.count("SELECT created_at FROM grants WHERE user_id = 'u1'");
    CHECK(std::llabs(at - real_now()) < 60'000);
    CHECK(db.count("SELECT count(DISTINCT period_key) FROM limit_counter WHERE user_id = 'u1'") == 1);
  } else {
    // SQLite is one host's file: its clock is the host's, and three dates are three days
    CHECK(granted == 3);
    CHECK(db.count("SELECT count(DISTINCT period_key) FROM limit_counter WHERE user_id = 'u1'") == 3);
  }
}

TEST_CASE("many hosts: the window is the database's - a host two days ahead still claims an activity that ends tomorrow") {
  TestDb db;
  db.migrate();
  rt::Spec s;
  s.timezone = "UTC";
  s.end = rc::format_utc(real_now() + kDay);
  rt::seed(db, s);
  auto r = db.rc({"claim", "act", "--user", "u1", "--biz-id", "b1", "-o", "json"}, host("+2d"));
  if (rt::is_pg()) {
    CHECK(r.rc == 0);
    CHECK(rt::last_json(r)["outcome"] == "granted");
  } else {
    CHECK(r.rc == 1);  // the host's clock: past the end
    CHECK(db.count("SELECT count(*) FROM grants") == 0);
  }
}

TEST_CASE("many hosts: a host two days ahead - db status shows the offset, expire refuses with 78 and ends nothing") {
  TestDb db;
  db.migrate();
  const int64_t id = rt::make_activity(db, "act", "live", real_now() + kDay);
  auto st = rt::last_json(db.ok({"db", "status", "-o", "json"}, 0, host("+2d")));
  auto x = db.rc({"expire", "-o", "json"}, host("+2d"));
  if (rt::is_pg()) {
    CHECK(st["clock"]["source"] == "database");
    const int64_t off = st["clock"]["offset_ms"].get<int64_t>();
    CHECK(off < -2 * kDay + 60'000);
    CHECK(off > -2 * kDay - 60'000);
    CHECK(st["clock"]["within_tolerance"] == false);
    CHECK(x.rc == 78);
    CHECK(x.err.find("job expire refused: the host's clock is") != std::string::npos);
    CHECK(x.err.find("ahead of the database's") != std::string::npos);
    CHECK(x.err.find("db.max_clock_skew_ms = 2000") != std::string::npos);
    CHECK(db.count("SELECT count(*) FROM activity WHERE id = " + std::to_string(id) + " AND state = 'live'") == 1);
    CHECK(db.count("SELECT count(*) FROM job_run") == 0);
    // a host within the tolerance runs it (and finds nothing to end: the activity ends tomorrow)
    CHECK(db.ok({"expire"}, 0, host("+1s")).rc == 0);
    CHECK(db.count("SELECT count(*) FROM activity WHERE state = 'live'") == 1);
    // a tolerance the operator widened lets a skewed host run; the times are the database's
    std::string cfg = rt::write_file(db.dir(), "wide.toml", "[db]\nmax_clock_skew_ms = 86400000\n");
    auto wide = host("+12h");
    wide["REWARDCTL_CONFIG"] = cfg;
    CHECK(db.ok({"expire"}, 0, wide).rc == 0);
    CHECK(db.count("SELECT count(*) FROM activity WHERE state = 'live'") == 1);
  } else {
    CHECK(st["clock"]["source"] == "host");
    CHECK(x.rc == 0);  // one host, one clock: two days on, the activity has ended
    CHECK(db.count("SELECT count(*) FROM activity WHERE state = 'ended'") == 1);
  }
}

TEST_CASE("many hosts: db.pooler takes none or transaction - anything else is refused with its file and line") {
  TestDb db;
  db.migrate();
  std::string cfg = rt::write_file(db.dir(), "bad.toml", "[db]\npooler = \"session\"\n");
  const int64_t before = db.count("SELECT count(*) FROM job_run");
  auto r = db.ok({"--config", cfg, "expire"}, 78);
  CHECK(r.err.find("bad.toml:2") != std::string::npos);
  CHECK(r.err.find("pooler") != std::string::npos);
  CHECK(r.err.find("transaction") != std::string::npos);
  auto e = db.ok({"expire"}, 78, {{"REWARDCTL_DB_POOLER", "yes"}});
  CHECK(e.err.find("REWARDCTL_DB_POOLER") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM job_run") == before);
  auto ttl = db.ok({"--config", rt::write_file(db.dir(), "ttl.toml", "[db]\nlease_ttl_ms = 10\n"), "expire"}, 78);
  CHECK(ttl.err.find("lease_ttl_ms") != std::string::npos);
  CHECK(rt::last_json(db.ok({"db", "status", "-o", "json"}))["pooler"] == (rt::is_pooled() ? "transaction" : "none"));
}

namespace {

// True when no session of the client named `app` (PGAPPNAME) has a transaction open, read over a
// direct connection (PgBouncer passes a client's application_name to the server connection it uses).
bool no_open_transaction(const std::string& app) {
  auto direct = rc::store::open_postgres(std::getenv("REWARDCTL_TEST_PG"), {});
  return direct->query("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
                       "AND state LIKE 'idle in transaction%'",
                       {app})[0]
             .i64(0) == 0;
}

}  // namespace

TEST_CASE("many hosts: a run whose lease was taken over stops with 75 'lease lost' and the work is done exactly once") {
  TestDb db;
  db.migrate();
  rt::make_activity(db, "act", "live", 4102444800000);
  rt::add_due_qualifications(db, "act", 3000, 1000);
  std::map<std::string, std::string> env{{"REWARDCTL_NOW", "2030-01-01T00:00:00Z"}};
  if (rt::is_pooled()) env["REWARDCTL_CONFIG"] = rt::write_file(db.dir(), "rewardctl.toml", "[db]\nlease_ttl_ms = 2000\n");
  const std::string app = "rc-lease-" + std::to_string(::getpid()) + "-" + std::to_string(real_now() % 1000000);
  auto env_a = env;
  env_a["PGAPPNAME"] = app;
  pid_t a = rt::spawn(db, {"expire", "--chunk-size", "1"}, env_a);
  REQUIRE(rt::wait_for(db, "SELECT count(*) FROM qualification WHERE status = 'expired'", 1));
  // A stops between two transactions
  kill(a, SIGSTOP);
  if (rt::is_pg()) {
    for (int i = 0; i < 100 && !no_open_transaction(app); ++i) {
      kill(a, SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      kill(a, SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(no_open_transaction(app));
  }
  const int64_t by_a = db.count("SELECT count(*) FROM qualification WHERE status = 'expired'");
  REQUIRE(by_a < 3000);
  if (!rt::is_pg()) {
    // SQLite: the flock lives as long as its process; nothing can take it from a live holder
    db.ok({"expire"}, 75, env);
    kill(a, SIGCONT);
    int status = 0;
    waitpid(a, &status, 0);
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'expired'") == 3000);
    return;
  }
  if (rt::is_pooled()) {
    // a row lease: A's heartbeat is frozen with it, and its row expires
    REQUIRE(rt::eventually([&] { return db.count("SELECT count(*) FROM job_lock WHERE expires_at < "
                                                 "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)") == 2; }, 20));
  } else {
    // a session advisory lock: the session that holds it is terminated (as an operator or a
    // failover would), and the lock goes with it
    // (expire's own and its conflict's, reconcile: a session each)
    const std::string locks =
        " FROM pg_locks WHERE locktype = 'advisory' AND classid = 7261748 AND CAST(objid AS BIGINT) IN "
        "(SELECT (CAST(hashtext(current_schema() || '/' || k) AS BIGINT) + 4294967296) % 4294967296 "
        "FROM (VALUES ('expire'), ('reconcile')) v(k))";
    REQUIRE(db.count("SELECT count(*)" + locks) == 2);
    db.open()->query("SELECT pg_terminate_backend(pid)" + locks);
  }
  // B takes the lease over and does the rest
  auto b = rt::last_json(db.ok({"expire", "-o", "json"}, 0, env));
  CHECK(b["state"] == "done");
  CHECK(b["counts"]["qualifications_expired"] == 3000 - by_a);
  // A wakes up: its next transaction finds its lease gone and stops before committing anything
  kill(a, SIGCONT);
  int status = 0;
  waitpid(a, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 75);
  CHECK(rt::read_file(db.dir() + "/spawn.err").find("lease lost") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'expired'") == 3000);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'qualification' AND to_state = 'expired'") == 3000);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE state = 'failed' AND exit_code = 75 AND error LIKE '%lease lost%'") == 1);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE state = 'done'") == 1);
  CHECK(db.count("SELECT count(*) FROM job_lock") == 0);
}

// Behind PgBouncer in transaction mode with db.pooler left at "none", the prepared statements of a
// client meet other server connections: that is a configuration to fix (exit 78 naming the
// setting), never an internal error (70), and a statement of another client is never run for ours.
TEST_CASE("many hosts: an undeclared transaction pooler is exit 78 naming db.pooler, never 70, and grants stay exact") {
  TestDb db;
  db.migrate();
  rt::Spec s;
  s.stock = 1000;
  rt::seed(db, s);
  const int procs = 8, each = 5;
  std::vector<std::thread> ts;
  std::vector<rt::Run> runs(size_t(procs * each));
  for (int p = 0; p < procs; ++p)
    ts.emplace_back([&, p] {
      for (int i = 0; i < each; ++i) {
        const std::string id = std::to_string(p) + "-" + std::to_string(i);
        runs[size_t(p * each + i)] =
            db.rc({"claim", "act", "--user", "u" + id, "--biz-id", "b" + id}, {{"REWARDCTL_DB_POOLER", "none"}});
      }
    });
  for (auto& t : ts) t.join();
  int ok = 0, config = 0;
  for (auto& r : runs) {
    CAPTURE(r.err);
    CHECK((r.rc == 0 || (rt::is_pooled() && r.rc == 78)));
    if (r.rc == 0) ++ok;
    if (r.rc == 78) {
      ++config;
      CHECK(r.err.find("pooler = \"transaction\"") != std::string::npos);
    }
  }
  CHECK(ok + config == procs * each);
  CHECK(db.count("SELECT count(*) FROM grants") == ok);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == ok);
}
