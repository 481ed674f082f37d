// drill: a definition rehearsed in a scratch database (a temporary SQLite file, or on the
// PostgreSQL suite an empty schema of the test server given as --scratch-db), never the live one.
// Every template and example passes; a peak far above the machine fails the peak row; a fuse rule
// that can never trip fails the fuse row; review.drill_required blocks publish until a drill of the
// current definition passes; bad input is refused with its exit code and records nothing.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "support/jobs.hpp"
#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

// --scratch-db: on PostgreSQL an empty schema of its own; on SQLite the default temporary file.
std::vector<std::string> scratch(const TestDb& s) {
  if (is_pg()) return {"--scratch-db", s.url()};
  return {};
}

struct Drilled {
  Run run;
  std::map<std::string, json> checks;  // check name -> its row
  json summary;
};

Drilled drill(const TestDb& db, std::vector<std::string> args, int expect,
              const std::map<std::string, std::string>& env = {}) {
  TestDb sc;  // an empty database for the drill to own
  std::vector<std::string> a{"drill"};
  a.insert(a.end(), args.begin(), args.end());
  for (auto& x : {"--workers", "6", "--lottery-draws", "3000", "-o", "json"}) a.push_back(x);
  for (auto& x : scratch(sc)) a.push_back(x);
  Drilled d;
  d.run = db.rc(a, env);
  INFO(d.run.out << d.run.err);
  REQUIRE(d.run.rc == expect);
  for (auto& l : lines(d.run.out)) {
    auto j = json::parse(l);
    if (j["type"] == "check") d.checks[j["check"]] = j;
    if (j["type"] == "drill") d.summary = j;
  }
  return d;
}

std::vector<std::string> definitions() {
  std::vector<std::string> out;
  for (auto dir : {"/templates", "/examples/activities"})
    for (auto& e : std::filesystem::directory_iterator(std::string(REWARDCTL_SOURCE_DIR) + dir))
      if (e.is_regular_file() && e.path().extension() == ".toml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The pids of live drill worker processes (`rewardctl __drill-worker`) whose environment holds
// mark=1: a test's own workers, whatever else runs on the machine.
std::vector<pid_t> workers_marked(const std::string& mark) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string n = e.path().filename().string();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    // A process that exits while it is read makes the read fail (ESRCH), which libstdc++'s filebuf
    // reports by throwing: such a process is gone, not running.
    std::string c, v, st;
    try {
      std::ifstream cmd(e.path() / "cmdline"), env(e.path() / "environ"), stat(e.path() / "stat");
      c.assign(std::istreambuf_iterator<char>(cmd), {});
      if (c.find("__drill-worker") == std::string::npos) continue;
      v.assign(std::istreambuf_iterator<char>(env), {});
      st.assign(std::istreambuf_iterator<char>(stat), {});
    } catch (const std::exception&) {
      continue;
    }
    if (v.find(mark + "=1") == std::string::npos) continue;
    const auto rp = st.rfind(')');
    if (rp != std::string::npos && st.size() > rp + 2 && st[rp + 2] == 'Z') continue;  // a zombie is not running
    out.push_back(pid_t(std::stol(n)));
  }
  return out;
}

std::string unique_mark() {
  std::random_device rd;
  return "RC_DRILL_TEST_MARK_" + std::to_string(rd()) + std::to_string(::getpid());
}

// A drill of the direct template in the background whose peak runs `workers` workers for 300 s,
// its processes marked with `mark` (workers_marked); scratch database `sc`. Returns its pid.
pid_t spawn_long_peak(const TestDb& db, const TestDb& sc, const std::string& mark, int workers) {
  std::vector<std::string> a{"drill", "-f", std::string(REWARDCTL_SOURCE_DIR) + "/templates/direct.toml",
                             "--workers", std::to_string(workers), "--peak-qps", "1", "--peak-seconds", "300"};
  for (auto& x : scratch(sc)) a.push_back(x);
  return spawn(db, a, {{mark, "1"}});
}

}  // namespace

TEST_CASE("drill: every template and example passes, and the run is recorded with its hash") {
  TestDb db;
  db.migrate();
  auto files = definitions();
  REQUIRE(files.size() >= 6);
  for (auto& f : files) {
    INFO(f);
    auto d = drill(db, {"-f", f}, 0);
    CHECK(d.summary["passed"] == true);
    REQUIRE(d.checks.size() == 9);
    for (auto name : {"oversell", "idempotency", "budget", "expiry", "reconcile"}) {
      INFO(name << ": " << d.checks[name].dump());
      CHECK(d.checks[name]["result"] != "fail");
    }
    CHECK(d.checks["oversell"]["result"] == "pass");
    CHECK(d.checks["idempotency"]["result"] == "pass");
    CHECK(d.checks["idempotency"]["figures"]["grants"] == 1);
    CHECK(d.checks["reconcile"]["result"] == "pass");
    CHECK(d.checks["peak"]["result"] == "n/a");
    CHECK(db.count("SELECT count(*) FROM drill_run WHERE definition_hash = $1 AND passed = 1",
                   {d.summary["definition_hash"].get<std::string>()}) == 1);
  }
  // nothing of a drill reaches the live database but its record
  CHECK(db.count("SELECT count(*) FROM activity") == 0);
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
}

TEST_CASE("drill: the lottery template's figures - frequencies, guarantee, degrade, cost per draw") {
  TestDb db;
  db.migrate();
  auto d = drill(db, {"-f", std::string(REWARDCTL_SOURCE_DIR) + "/templates/lottery.toml"}, 0);
  auto lot = d.checks["lottery"];
  CHECK(lot["result"] == "pass");
  CHECK(lot["figures"]["draws"] == 3000);
  CHECK(lot["figures"]["p_value"].get<double>() > 0.001);
  REQUIRE(lot["figures"]["guarantees"].size() == 1);
  CHECK(lot["figures"]["guarantees"][0]["drawn"] == "coupon_5");
  CHECK(lot["figures"]["degrade"]["consolation"] == "thanks");
  CHECK(lot["figures"]["expected_cost_per_draw_cents"].get<double>() > 0);
  // the daily limit resets at midnight in Asia/Shanghai (16:00 UTC), not at UTC midnight
  auto lim = d.checks["limits"];
  CHECK(lim["result"] == "pass");
  CHECK(lim["figures"]["granted"] == 3);
  CHECK(lim["figures"]["next_period"].get<std::string>().find("T00:00:00+08:00") != std::string::npos);
  CHECK(lim["figures"]["before_edge"] == "rejected:limit_reached");
  CHECK(lim["figures"]["at_edge"] == "granted");
  auto fuse = d.checks["fuse"];
  CHECK(fuse["result"] == "pass");
  REQUIRE(fuse["figures"]["rules"].size() == 2);
  for (auto& r : fuse["figures"]["rules"]) {
    CHECK(r["quiet_trips"] == 0);
    CHECK(r["tripped"] == true);
  }
}

TEST_CASE("drill: a --peak-qps far above the machine fails the peak row (exit 1)") {
  TestDb db;
  db.migrate();
  auto d = drill(db, {"-f", std::string(REWARDCTL_SOURCE_DIR) + "/templates/direct.toml", "--peak-qps", "1000000000",
                      "--peak-seconds", "1"},
                 1);
  CHECK(d.checks["peak"]["result"] == "fail");
  CHECK(d.checks["peak"]["figures"]["claims_per_s"].get<double>() > 0);
  // the figure is of claims without delivery, and says so
  CHECK(d.checks["peak"]["figures"]["delivery"] == false);
  CHECK(d.checks["peak"]["detail"].get<std::string>().find("without delivery") != std::string::npos);
  CHECK(d.checks["oversell"]["result"] == "pass");
  CHECK(d.summary["passed"] == false);
  CHECK(db.count("SELECT count(*) FROM drill_run WHERE passed = 0") == 1);
}

TEST_CASE("drill: a fuse rule that can never trip with the stock fails the fuse row") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 100;
  s.extra = "[[fuse]]\nname = \"never\"\nprize = \"p1\"\nwindow_seconds = 60\nmax_count = 1000\n"
            "[[fuse]]\nname = \"fine\"\nprize = \"p1\"\nwindow_seconds = 60\nmax_count = 20\n";
  const std::string f = write_file(db.dir(), "act.toml", definition(s));
  auto d = drill(db, {"-f", f}, 1);
  auto fuse = d.checks["fuse"];
  CHECK(fuse["result"] == "fail");
  CHECK(fuse["detail"].get<std::string>().find("never: can never trip with this stock") != std::string::npos);
  REQUIRE(fuse["figures"]["rules"].size() == 2);
  CHECK(fuse["figures"]["rules"][1]["result"] == "pass");
  CHECK(fuse["figures"]["rules"][1]["spike"] == 21);
}

TEST_CASE("drill: review.drill_required - publish needs a passing drill of the current definition") {
  TestDb db;
  db.migrate();
  std::map<std::string, std::string> req{{"REWARDCTL_REVIEW_DRILL_REQUIRED", "true"}};
  Spec s;
  const std::string f = write_file(db.dir(), "act.toml", definition(s));
  db.ok({"activity", "create", "-f", f, "--operator", "alice"});
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
  auto refused = db.ok({"activity", "publish", "act", "--full", "--operator", "carol"}, 77, req);
  CHECK(refused.err.find("rewardctl drill act") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM activity WHERE state = 'approved'") == 1);
  // a failed drill does not count
  drill(db, {"act", "--peak-qps", "1000000000", "--peak-seconds", "0.2"}, 1);
  db.ok({"activity", "publish", "act", "--full", "--operator", "carol"}, 77, req);
  // without the setting, publish does not ask
  CHECK(db.rc({"activity", "publish", "act", "--full", "--dry-run", "--operator", "carol"}).rc == 0);

  // a passing drill of the stored definition lets it through; a changed definition needs its own
  Spec s2 = s;
  s2.stock = 50;
  const std::string f2 = write_file(db.dir(), "act2.toml", definition(s2));
  drill(db, {"act"}, 0);
  db.ok({"activity", "update", "-f", f2, "--operator", "alice"});  // approvals voided, a new hash
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
  db.ok({"activity", "publish", "act", "--full", "--operator", "carol"}, 77, req);
  drill(db, {"-f", f2}, 0);  // drilling the file before (or after) create counts: same hash
  db.ok({"activity", "publish", "act", "--full", "--operator", "carol"}, 0, req);
  CHECK(db.count("SELECT count(*) FROM activity WHERE state = 'live'") == 1);
}

TEST_CASE("drill: bad input is refused with its exit code and records nothing") {
  TestDb db;
  db.migrate();
  const std::string f = std::string(REWARDCTL_SOURCE_DIR) + "/templates/direct.toml";
  CHECK(db.ok({"drill"}, 64).err.find("ACTIVITY or -f FILE") != std::string::npos);
  CHECK(db.ok({"drill", "act", "-f", f}, 64).err.find("ACTIVITY or -f FILE") != std::string::npos);
  CHECK(db.ok({"drill", "nope"}, 67).err.find("nope") != std::string::npos);
  db.ok({"drill", "-f", f, "--workers", "1"}, 64);  // nothing would run concurrently
  db.ok({"drill", "-f", f, "--peak-qps", "-1"}, 64);
  CHECK(db.ok({"drill", "-f", f, "--peak-qps", "nan"}, 64).err.find("--peak-qps") != std::string::npos);
  db.ok({"drill", "-f", db.dir() + "/missing.toml"}, 66);
  const std::string bad = write_file(db.dir(), "bad.toml", "code = \"x\"\nkind = \"direct\"\n");
  CHECK(db.ok({"drill", "-f", bad}, 65).err.find("bad.toml") != std::string::npos);
  // a scratch database that holds someone's tables, or the live database itself
  TestDb other;
  other.migrate();
  CHECK(db.ok({"drill", "-f", f, "--scratch-db", other.url()}, 65).err.find("not made by a drill") !=
        std::string::npos);
  CHECK(other.count("SELECT count(*) FROM activity") == 0);
  CHECK(db.ok({"drill", "-f", f, "--scratch-db", db.url()}, 65).err.find("live database") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM drill_run") == 0);
  // --dry-run records nothing either
  auto d = drill(db, {"-f", f, "--dry-run"}, 0);
  CHECK(d.summary["run"].is_null());
  CHECK(db.count("SELECT count(*) FROM drill_run") == 0);
}

TEST_CASE("drill: a scratch database made by an earlier drill is used again") {
  TestDb db;
  db.migrate();
  TestDb sc;
  const std::string url = is_pg() ? sc.url() : "sqlite:" + sc.dir() + "/scratch.db";
  const std::string f = std::string(REWARDCTL_SOURCE_DIR) + "/templates/redpack.toml";
  for (int i = 0; i < 2; ++i) {
    auto r = db.rc({"drill", "-f", f, "--workers", "4", "--scratch-db", url, "-o", "json"});
    INFO(r.out << r.err);
    CHECK(r.rc == 0);
  }
  CHECK(db.count("SELECT count(*) FROM drill_run WHERE passed = 1") == 2);
}

TEST_CASE("drill: an interrupted drill exits 130 and records nothing, and a latest failing drill withdraws a pass") {
  TestDb db;
  db.migrate();
  TestDb sc;
  std::vector<std::string> argv{"timeout", "--preserve-status", "-s", "INT", "4", REWARDCTL_BIN, "--db", db.url(), "drill", "-f",
                                std::string(REWARDCTL_SOURCE_DIR) + "/templates/lottery.toml", "--workers", "4",
                                "--lottery-draws", "5000000"};
  for (auto& x : scratch(sc)) argv.push_back(x);
  auto r = run_program(argv);
  INFO(r.err);
  CHECK(r.rc == 130);
  CHECK(r.err.find("nothing recorded") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM drill_run") == 0);

  // drill_required follows the latest run of a hash: a later failure withdraws an earlier pass
  Spec s;
  const std::string f = write_file(db.dir(), "act.toml", definition(s));
  std::map<std::string, std::string> req{{"REWARDCTL_REVIEW_DRILL_REQUIRED", "true"}, {"REWARDCTL_REVIEW_REQUIRED", "false"}};
  drill(db, {"-f", f}, 0);
  drill(db, {"-f", f, "--peak-qps", "1000000000", "--peak-seconds", "0.2"}, 1);
  CHECK(db.ok({"activity", "create", "-f", f, "--publish", "--operator", "ci"}, 77, req).err.find("latest drill failed") !=
        std::string::npos);
  drill(db, {"-f", f}, 0);
  db.ok({"activity", "create", "-f", f, "--publish", "--operator", "ci"}, 0, req);
}

TEST_CASE("drill: the concurrent checks run as distinct worker processes, one connection each") {
  TestDb db;
  db.migrate();
  auto d = drill(db, {"-f", std::string(REWARDCTL_SOURCE_DIR) + "/templates/lottery.toml", "--peak-qps", "1",
                      "--peak-seconds", "0.5"},
                 0);
  for (auto name : {"oversell", "idempotency", "limits", "peak"}) {
    INFO(name << ": " << d.checks[name].dump());
    CHECK(d.checks[name]["result"] == "pass");
    CHECK(d.checks[name]["figures"]["workers"] == 6);
    CHECK(d.checks[name]["figures"]["worker_pids"] == 6);
  }
  CHECK(d.checks["budget"]["figures"]["worker_pids"] == 2);
  // every worker's claims reached the database: the outcomes add up to the claims made
  int64_t sum = 0;
  for (auto& [k, v] : d.checks["oversell"]["figures"]["outcomes"].items()) sum += v.get<int64_t>();
  CHECK(sum == d.checks["oversell"]["figures"]["claims"].get<int64_t>());
  CHECK(d.run.out.find("__drill-worker") == std::string::npos);
  // the worker entry is internal: not a command in --help, and it refuses what is not a drill's task
  CHECK(db.rc({"--help"}).out.find("drill-worker") == std::string::npos);
  for (std::string input : {"", "garbage\n", "{\"check\": 1}\n"}) {
    auto w = run_program({REWARDCTL_BIN, "__drill-worker"}, {}, input);
    CHECK(w.rc == 64);
    CHECK(w.out.find("not a drill task") != std::string::npos);
    CHECK(w.out.find("\"kind\":\"usage\"") != std::string::npos);
  }
  // a worker's own error reaches the drill as its kind's name, and the worker exits with that kind's code
  const std::string task = R"({"check":"oversell","dialect":"sqlite","target":")" + db.dir() +
                           R"(/none.db","code":"act","now":0,"operator":"t","worker":0,"claims":1,"seconds":0,)"
                           R"("user":"u","biz":"b","prizes":[]})"
                           "\n";
  auto gone = run_program({REWARDCTL_BIN, "__drill-worker"}, {}, task);
  CHECK(gone.rc == 78);
  CHECK(gone.out.find("\"kind\":\"config\"") != std::string::npos);
  CHECK(gone.out.find("does not exist") != std::string::npos);
}

TEST_CASE("drill: a worker process that dies fails its check with a message, and the drill goes on") {
  TestDb db;
  db.migrate();
  const std::string mark = unique_mark();
  // test-only hook (src/jobs/drill/workers.hpp): worker 0 of the named check kills itself after one claim
  auto d = drill(db, {"-f", std::string(REWARDCTL_SOURCE_DIR) + "/templates/direct.toml"}, 1,
                 {{"REWARDCTL_TEST_DRILL_KILL_WORKER", "oversell"}, {mark, "1"}});
  auto o = d.checks["oversell"];
  CHECK(o["result"] == "fail");
  const std::string detail = o["detail"].get<std::string>();
  CHECK(detail.find("worker 0 (pid ") != std::string::npos);
  CHECK(detail.find("killed by signal 9") != std::string::npos);
  CHECK(detail.find("the other workers were stopped") != std::string::npos);
  // the other checks ran on, with their own workers
  CHECK(d.checks["idempotency"]["result"] == "pass");
  CHECK(d.checks["reconcile"]["result"] == "pass");
  CHECK(d.summary["passed"] == false);
  CHECK(db.count("SELECT count(*) FROM drill_run WHERE passed = 0") == 1);
  CHECK(workers_marked(mark).empty());
}

TEST_CASE("drill: SIGINT during the peak stops every worker process and records nothing") {
  TestDb db;
  db.migrate();
  TestDb sc;
  const std::string mark = unique_mark();
  const pid_t pid = spawn_long_peak(db, sc, mark, 4);
  // the peak's 4 workers are claiming: the checks before it are done (their lines are logged)
  auto log = [&] {
    std::ifstream f(db.dir() + "/spawn.err");
    return std::string((std::istreambuf_iterator<char>(f)), {});
  };
  const bool claiming =
      eventually([&] { return log().find("drill expiry:") != std::string::npos && workers_marked(mark).size() == 4; }, 120);
  INFO(log());
  CHECK(claiming);
  ::kill(pid, SIGINT);
  int status = 0;
  // bounded: the drill answers the signal at once, or the test fails instead of hanging
  const bool ended = eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, 60);
  if (!ended) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  REQUIRE(ended);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(eventually([&] { return workers_marked(mark).empty(); }, 10));
  CHECK(db.count("SELECT count(*) FROM drill_run") == 0);
}

TEST_CASE("drill: kill -9 of the drill takes its worker processes with it") {
  TestDb db;
  db.migrate();
  TestDb sc;
  const std::string mark = unique_mark();
  const pid_t pid = spawn_long_peak(db, sc, mark, 3);
  CHECK(eventually([&] { return workers_marked(mark).size() == 3; }, 120));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  // PR_SET_PDEATHSIG: the kernel kills every worker when the drill dies
  CHECK(eventually([&] { return workers_marked(mark).empty(); }, 10));
  CHECK(db.count("SELECT count(*) FROM drill_run") == 0);
}
