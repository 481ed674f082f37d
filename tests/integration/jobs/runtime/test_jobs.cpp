// The job runner through the real binary, on the backend under test: the lease (a second run exits
// 75 naming the holder and writes nothing; SIGKILL of the holder frees it), job_run records, the
// pause switch, --limit, --max-runtime, SIGTERM between chunks, and the Prometheus textfile.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "support/harness.hpp"
#include "support/jobs.hpp"

using nlohmann::json;
using rt::TestDb;

namespace {

int64_t changes(const TestDb& db) { return db.count("SELECT count(*) FROM status_log") + db.count("SELECT count(*) FROM job_run"); }

}  // namespace

TEST_CASE("jobs: a second expire while one holds the lease exits 75 naming the holder and writes nothing, and SIGKILL frees the lease") {
  TestDb db;
  db.migrate();
  rt::make_activity(db, "act", "live", 4102444800000);
  rt::add_due_qualifications(db, "act", 3000, 1000);
  // Behind a pooler the lease is a job_lock row with an expiry (docs/design.md §9.3): a
  // killed holder's row is freed when it expires, after lease_ttl_ms without a heartbeat, and not
  // before. The frozen holder below must outlive the second run's attempt, then expire soon after.
  std::map<std::string, std::string> env{{"REWARDCTL_NOW", "2030-01-01T00:00:00Z"}};
  if (rt::is_pooled()) env["REWARDCTL_CONFIG"] = rt::write_file(db.dir(), "rewardctl.toml", "[db]\nlease_ttl_ms = 8000\n");
  std::map<std::string, std::string> cfg_only = env;
  cfg_only.erase("REWARDCTL_NOW");
  // run A: one row per chunk, so it is still working when it is frozen
  pid_t a = rt::spawn(db, {"expire", "--chunk-size", "1"}, env);
  REQUIRE(rt::wait_for(db, "SELECT count(*) FROM job_lock WHERE name = 'expire' AND pid IS NOT NULL", 1));
  REQUIRE(rt::wait_for(db, "SELECT count(*) FROM qualification WHERE status = 'expired'", 1));
  kill(a, SIGSTOP);
  // a COMMIT A sent just before it stopped may still land on the server: wait until nothing moves
  int64_t before = changes(db);
  REQUIRE(rt::eventually([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int64_t now = changes(db);
    bool still = now == before;
    before = now;
    return still;
  }));
  auto b = db.ok({"expire", "-o", "json"}, 75, env);
  CHECK(b.err.find("lease 'expire' is held by job expire run") != std::string::npos);
  CHECK(b.err.find("(pid " + std::to_string(a)) != std::string::npos);
  CHECK(b.err.find("nothing was done") != std::string::npos);
  CHECK(changes(db) == before);  // the loser wrote nothing, not even a job_run row
  CHECK(db.count("SELECT count(*) FROM job_run") == 1);

  auto locks = rt::lines(db.ok({"jobs", "locks", "-o", "json"}, 0, cfg_only).out);
  REQUIRE(locks.size() == 2);  // expire and its conflict, reconcile
  for (auto& l : locks) {
    auto j = json::parse(l);
    CHECK(j["pid"] == a);
    CHECK(j["held"] == true);
  }

  kill(a, SIGKILL);
  int status = 0;
  waitpid(a, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  const int64_t done_by_a = db.count("SELECT count(*) FROM qualification WHERE status = 'expired'");
  CHECK(done_by_a < 3000);
  // the lease died with its holder (PostgreSQL frees it once the server sees the session end;
  // a row lease once it expires)
  REQUIRE(rt::eventually([&] {
    for (auto& l : rt::lines(db.ok({"jobs", "locks", "-o", "json"}, 0, cfg_only).out))
      if (json::parse(l)["held"] != false) return false;
    return true;
  }, 30));
  // the next run takes it and finishes the work, each row once
  auto c = rt::last_json(db.ok({"expire", "-o", "json"}, 0, env));
  CHECK(c["state"] == "done");
  CHECK(c["counts"]["qualifications_expired"] == 3000 - done_by_a);
  CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'expired'") == 3000);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'qualification' AND to_state = 'expired'") == 3000);
  CHECK(db.count("SELECT count(*) FROM job_lock") == 0);  // the finished run removed its rows (and A's stale ones)
  auto hist = rt::lines(db.ok({"jobs", "history", "--job", "expire", "-o", "json"}).out);
  REQUIRE(hist.size() == 2);
  CHECK(json::parse(hist[0])["state"] == "done");
  // A never recorded its end (it was killed): the run that took its lease over found it abandoned
  auto killed = json::parse(hist[1]);
  CHECK(killed["state"] == "abandoned");
  CHECK(killed["finished_at"] != nullptr);
  const std::string why = killed["error"];
  CHECK(why.find("found abandoned by") != std::string::npos);
  CHECK(why.find("(run " + std::to_string(int64_t(c["run_id"])) + ")") != std::string::npos);
}

// A run without a lease (list-issue, import) killed on this host: the next `jobs history` (or the
// next run of its job) finds its process gone and marks it abandoned; a live one stays running.
TEST_CASE("jobs: a run whose process is gone is marked abandoned by jobs history, a live one is not") {
  TestDb db;
  db.migrate();
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  int status = 0;
  waitpid(dead, &status, 0);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  auto st = db.open();
  for (auto [job, pid] : {std::pair<const char*, int64_t>{"list-issue", dead}, {"import-qualifications", getpid()}})
    st->exec("INSERT INTO job_run (job, holder, state, started_at, host, pid) VALUES ($1, 'x', 'running', 0, $2, $3)",
             {std::string(job), std::string(host), pid});
  st->exec("INSERT INTO job_run (job, holder, state, started_at, host, pid) VALUES ('list-issue', 'x', 'running', 0, "
           "'another-host', $1)",
           {int64_t(dead)});
  auto hist = rt::lines(db.ok({"jobs", "history", "-o", "json"}).out);
  REQUIRE(hist.size() == 3);
  std::map<std::string, std::string> by_host_job;
  for (auto& l : hist) {
    auto j = json::parse(l);
    by_host_job[std::string(j["host"]) + "/" + std::string(j["job"])] = j["state"];
  }
  CHECK(by_host_job[std::string(host) + "/list-issue"] == "abandoned");
  CHECK(by_host_job[std::string(host) + "/import-qualifications"] == "running");  // this test's own pid: alive
  CHECK(by_host_job["another-host/list-issue"] == "running");  // another host's process is not ours to judge
  CHECK(db.count("SELECT count(*) FROM job_run WHERE state = 'abandoned' AND error LIKE 'found abandoned by jobs "
                 "history%' AND finished_at IS NOT NULL") == 1);
}

TEST_CASE("jobs: paused by the config or by the stop file, every job prints paused, exits 0 and touches nothing") {
  TestDb db;
  db.migrate();
  rt::make_activity(db, "act", "live", 1000);
  rt::add_due_qualifications(db, "act", 10, 1000);
  const int64_t before = changes(db);
  SUBCASE("jobs.paused = true") {
    std::string cfg = rt::write_file(db.dir(), "rewardctl.toml", "[jobs]\npaused = true\n");
    for (auto job : {"expire", "resend", "fuse-scan", "reconcile"}) {
      auto r = db.ok({"--config", cfg, job}, 0);
      CHECK(r.out.find("paused") != std::string::npos);
      auto j = rt::last_json(db.ok({"--config", cfg, job, "-o", "json"}, 0));
      CHECK(j["state"] == "paused");
    }
  }
  SUBCASE("the stop file exists") {
    std::string stop = db.dir() + "/STOP";
    std::string cfg = rt::write_file(db.dir(), "rewardctl.toml", "[jobs]\nstop_file = \"" + stop + "\"\n");
    rt::write_file(db.dir(), "STOP", "");
    auto r = db.ok({"--config", cfg, "expire", "-o", "json"}, 0);
    CHECK(rt::last_json(r)["state"] == "paused");
    CHECK(rt::last_json(r)["reason"].get<std::string>().find(stop) != std::string::npos);
    unlink(stop.c_str());
    CHECK(rt::last_json(db.ok({"--config", cfg, "expire", "-o", "json"}, 0))["state"] == "done");
    return;
  }
  SUBCASE("an unknown [jobs] key is a config error naming file:line:column") {
    std::string cfg = rt::write_file(db.dir(), "rewardctl.toml", "[jobs]\npaused = false\npasued = true\n");
    auto r = db.ok({"--config", cfg, "expire"}, 78);
    CHECK(r.err.find(cfg + ":3:1: unknown setting 'jobs.pasued'") != std::string::npos);
  }
  CHECK(changes(db) == before);
  CHECK(db.count("SELECT count(*) FROM activity WHERE state = 'ended'") == 0);
}

TEST_CASE("jobs: --limit and --max-runtime stop between chunks, recorded in job_run") {
  TestDb db;
  db.migrate();
  rt::make_activity(db, "act", "live", 4102444800000);
  rt::add_due_qualifications(db, "act", 50, 1000);
  const std::map<std::string, std::string> now{{"REWARDCTL_NOW", "2030-01-01T00:00:00Z"}};
  auto a = rt::last_json(db.ok({"expire", "--limit", "20", "--chunk-size", "7", "-o", "json"}, 0, now));
  CHECK(a["counts"]["qualifications_expired"] == 20);
  CHECK(a["stopped"] == "limit");
  CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'expired'") == 20);
  auto b = rt::last_json(db.ok({"expire", "--max-runtime", "1ms", "--chunk-size", "1", "-o", "json"}, 0, now));
  CHECK(b["stopped"] == "max_runtime");
  CHECK(b["counts"]["qualifications_expired"].get<int64_t>() < 30);
  auto c = rt::last_json(db.ok({"expire", "-o", "json"}, 0, now));
  CHECK(c["counts"]["qualifications_expired"] == 30 - b["counts"]["qualifications_expired"].get<int64_t>());
  CHECK(db.count("SELECT count(*) FROM job_run WHERE stopped = 'limit' AND state = 'done'") == 1);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE stopped = 'max_runtime'") == 1);
  db.ok({"expire", "--max-runtime", "soon"}, 64);
  db.ok({"jobs", "history", "--job", "nope"}, 64);
}

TEST_CASE("jobs: SIGTERM finishes the chunk, records the run as interrupted and exits 130") {
  TestDb db;
  db.migrate();
  rt::make_activity(db, "act", "live", 4102444800000);
  rt::add_due_qualifications(db, "act", 3000, 1000);
  pid_t a = rt::spawn(db, {"expire", "--chunk-size", "1"}, {{"REWARDCTL_NOW", "2030-01-01T00:00:00Z"}});
  REQUIRE(rt::wait_for(db, "SELECT count(*) FROM qualification WHERE status = 'expired'", 1));
  kill(a, SIGTERM);
  int status = 0;
  waitpid(a, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  const int64_t expired = db.count("SELECT count(*) FROM qualification WHERE status = 'expired'");
  CHECK(expired < 3000);
  // what it committed is whole: one status-log row per expired row, and its counts say so
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'qualification'") == expired);
  auto h = json::parse(rt::lines(db.ok({"jobs", "history", "-o", "json"}).out).at(0));
  CHECK(h["state"] == "interrupted");
  CHECK(h["exit_code"] == 130);
  CHECK(h["counts"]["qualifications_expired"] == expired);
  CHECK(db.count("SELECT count(*) FROM job_lock") == 0);
}

TEST_CASE("jobs: --metrics-textfile writes Prometheus text format atomically and keeps other jobs' series") {
  TestDb db;
  db.migrate();
  rt::make_activity(db, "act", "live", 1000);
  const std::string prom = db.dir() + "/rewardctl.prom";
  db.ok({"expire", "--metrics-textfile", prom}, 0, {{"REWARDCTL_NOW", "2030-01-01T00:00:00Z"}});
  db.ok({"resend", "--metrics-textfile", prom}, 0, {{"REWARDCTL_NOW", "2030-01-01T00:00:01Z"}});
  std::string text = rt::read_file(prom);
  INFO(text);
  // the exposition format: HELP and TYPE once per family, before its samples; samples are
  // name{labels} value with a float value
  std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*\{([a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*",?)*\} -?[0-9.eE+-]+$)");
  std::set<std::string> typed, helped;
  for (auto& l : rt::lines(text)) {
    if (l.rfind("# HELP ", 0) == 0) {
      helped.insert(l.substr(7, l.find(' ', 7) - 7));
      continue;
    }
    if (l.rfind("# TYPE ", 0) == 0) {
      auto name = l.substr(7, l.find(' ', 7) - 7);
      CHECK(typed.insert(name).second);
      CHECK(l.substr(l.rfind(' ') + 1) == "gauge");
      continue;
    }
    CHECK(std::regex_match(l, sample));
    CHECK(typed.count(l.substr(0, l.find('{'))) == 1);
  }
  CHECK(text.find("rewardctl_job_last_success_timestamp_seconds{job=\"expire\"} 1893456000\n") != std::string::npos);
  CHECK(text.find("rewardctl_job_last_success_timestamp_seconds{job=\"resend\"} 1893456001\n") != std::string::npos);
  CHECK(text.find("rewardctl_job_last_items{job=\"expire\",outcome=\"activities_ended\"} 1\n") != std::string::npos);
  CHECK(text.find("rewardctl_job_last_exit_code{job=\"expire\"} 0\n") != std::string::npos);
  CHECK(access((prom + ".tmp." + std::to_string(getpid())).c_str(), F_OK) != 0);
  // a failed run keeps the last success and reports its exit code
  db.expect_damage();  // the books cannot be reconciled without a budget table
  db.open()->exec("DROP TABLE budget" + std::string(rt::is_pg() ? " CASCADE" : ""));
  rt::make_activity(db, "act2", "live", 1000);
  db.ok({"expire", "--metrics-textfile", prom}, 70, {{"REWARDCTL_NOW", "2030-01-02T00:00:00Z"}});
  text = rt::read_file(prom);
  CHECK(text.find("rewardctl_job_last_success_timestamp_seconds{job=\"expire\"} 1893456000\n") != std::string::npos);
  CHECK(text.find("rewardctl_job_last_exit_code{job=\"expire\"} 70\n") != std::string::npos);
  CHECK(text.find("rewardctl_job_last_success_timestamp_seconds{job=\"resend\"} 1893456001\n") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE state = 'failed' AND error LIKE '%budget%'") == 1);
}
