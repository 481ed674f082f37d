// jobs/runtime/runner.cpp parse_duration_ms, jobs/runtime/job_table.cpp, jobs/runtime/lease.cpp (SQLite lock file),
// core/engine/resend.cpp resend_delay_ms, jobs/runtime/metrics.cpp.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "core/engine/resend.hpp"
#include "jobs/runtime/job_table.hpp"
#include "jobs/runtime/lease.hpp"
#include "jobs/runtime/metrics.hpp"
#include "jobs/runtime/runner.hpp"

using namespace rc;

TEST_CASE("jobs: durations for --max-runtime and --init-grace") {
  CHECK(jobs::parse_duration_ms("90s", "--x") == 90'000);
  CHECK(jobs::parse_duration_ms("10m", "--x") == 600'000);
  CHECK(jobs::parse_duration_ms("1h30m", "--x") == 5'400'000);
  CHECK(jobs::parse_duration_ms("500ms", "--x") == 500);
  CHECK(jobs::parse_duration_ms("2d", "--x") == 172'800'000);
  for (const char* bad : {"", "10", "m", "5x", "-1s", "0s", "1.5h", "1h 2m"}) {
    CAPTURE(bad);
    try {
      jobs::parse_duration_ms(bad, "--max-runtime");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == Errc::usage);
      CHECK(std::string(e.what()).find("--max-runtime") == 0);
    }
  }
}

TEST_CASE("jobs: the job table names each job once, with the locks issue 10 to 12 need") {
  std::set<std::string> names;
  for (auto& d : jobs::job_table()) CHECK(names.insert(d.name).second);
  CHECK(jobs::job_decl("expire").lock == jobs::LockKind::exclusive);
  CHECK(jobs::job_decl("resend").lock == jobs::LockKind::per_item);
  CHECK(jobs::job_decl("fuse-scan").lock == jobs::LockKind::exclusive);
  CHECK(jobs::job_decl("reconcile").lock == jobs::LockKind::exclusive);
  CHECK(jobs::job_decl("list-issue").lock == jobs::LockKind::per_item);
  // conflicts are symmetric: each side takes the other's lease
  for (auto& d : jobs::job_table())
    for (auto& c : d.conflicts) {
      auto& o = jobs::job_decl(c);
      CHECK(std::find(o.conflicts.begin(), o.conflicts.end(), d.name) != o.conflicts.end());
    }
  CHECK_THROWS_AS(jobs::job_decl("nope"), Error);
}

TEST_CASE("jobs: the SQLite lease is an flock beside the database, freed when its holder lets go") {
  char dir[] = "/tmp/rclease.XXXXXX";
  REQUIRE(mkdtemp(dir));
  store::Dsn dsn{store::Dialect::sqlite, std::string(dir) + "/x.db"};
  CHECK(jobs::lease_file(dsn.target, "list-issue:B 1/2") == dsn.target + ".job-list-issue_B_1_2.lock");
  store::StoreOptions create;
  create.create_if_missing = true;
  auto st = store::open_store(dsn, create);  // lease_held reads job_lock only for row leases
  {
    auto a = jobs::try_lease(dsn, {}, "expire");
    REQUIRE(a);
    CHECK_FALSE(jobs::try_lease(dsn, {}, "expire"));  // a second holder, even in the same process
    CHECK(jobs::lease_held(dsn, {}, *st, "expire"));
    CHECK(jobs::try_lease(dsn, {}, "reconcile"));  // another key is independent
  }
  CHECK_FALSE(jobs::lease_held(dsn, {}, *st, "expire"));
  CHECK(jobs::try_lease(dsn, {}, "expire"));
  store::Dsn nowhere{store::Dialect::sqlite, "/nonexistent-dir/x.db"};
  CHECK_THROWS_AS(jobs::try_lease(nowhere, {}, "expire"), Error);
  std::string cmd = "rm -rf " + std::string(dir);
  (void)!system(cmd.c_str());
}

TEST_CASE("resend backoff: 60 s doubling to 1 h, less up to a fifth of jitter") {
  const int64_t first = 60'000;
  const int64_t bases[] = {60'000, 120'000, 240'000, 480'000, 960'000, 1'920'000, 3'600'000, 3'600'000, 3'600'000};
  for (int64_t a = 0; a < 9; ++a) {
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < 200; ++i) {
      int64_t d = engine::resend_delay_ms(a, first);
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
    CAPTURE(a);
    CHECK(lo >= bases[a] - bases[a] / 5);
    CHECK(hi <= bases[a]);
    CHECK(lo < hi);  // there is jitter
  }
  CHECK(engine::resend_delay_ms(1000, first) <= 3'600'000);  // no overflow on a huge count
}

TEST_CASE("metrics: a run replaces only its own job's series") {
  char dir[] = "/tmp/rcprom.XXXXXX";
  REQUIRE(mkdtemp(dir));
  std::string path = std::string(dir) + "/m.prom";
  jobs::JobReport a;
  a.job = "expire";
  a.state = "done";
  a.counts = {{"activities_ended", 2}};
  a.seconds = 0.5;
  jobs::write_metrics(path, a, 1000);
  jobs::JobReport b = a;
  b.job = "resend";
  b.counts = {{"delivered", 3}};
  jobs::write_metrics(path, b, 2000);
  a.state = "failed";
  a.exit = Exit::unavailable;
  a.counts = {};
  jobs::write_metrics(path, a, 3000);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string t = ss.str();
  CHECK(t.find("rewardctl_job_last_success_timestamp_seconds{job=\"expire\"} 1\n") != std::string::npos);
  CHECK(t.find("rewardctl_job_last_run_timestamp_seconds{job=\"expire\"} 3\n") != std::string::npos);
  CHECK(t.find("rewardctl_job_last_exit_code{job=\"expire\"} 69\n") != std::string::npos);
  CHECK(t.find("activities_ended") == std::string::npos);  // the failed run had no items
  CHECK(t.find("rewardctl_job_last_items{job=\"resend\",outcome=\"delivered\"} 3\n") != std::string::npos);
  CHECK(jobs::metrics_without_job(t, "resend").find("resend") == std::string::npos);
  std::string cmd = "rm -rf " + std::string(dir);
  (void)!system(cmd.c_str());
}
