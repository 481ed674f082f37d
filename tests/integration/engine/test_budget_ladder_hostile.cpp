// The budget ladder under attack, on the backend under test: 16 rewardctl processes crossing warn at
// once (one WARN line, one alert, one status-log row among them), budget raises racing claims (the
// stored step always ends where the ratio is, its log continuous), and a claim killed with SIGKILL
// while it holds the crossing (nothing moved; the next claim moves the step once).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/activity/live.hpp"
#include "core/budget_ladder.hpp"
#include "support/alert_sink.hpp"
#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

// 10 cents a claim out of 1000: warn from 500, degrade from 700, stop from 900.
Spec ladder_spec() {
  Spec s;
  s.budget = 1000;
  s.item_kind = "cash";
  s.unit_cost = 1;
  s.amount = 10;
  s.stock = 10000;
  s.buckets = 4;
  s.extra = "[budget]\nwarn_at = 0.5\ndegrade_at = 0.7\nstop_at = 0.9\n";
  return s;
}

// n claims through an in-process engine (fast), users and biz ids prefixed.
void claims(const TestDb& db, int n, const std::string& prefix) {
  auto box = engine(db);
  for (int i = 0; i < n; ++i)
    REQUIRE(rt::claim(*box.engine, "act", prefix + std::to_string(i), prefix + std::to_string(i)).status ==
            rc::engine::Status::granted);
}

// Starts rewardctl with args, stdout and stderr to files named after `tag` in dir. Returns its pid.
pid_t spawn(const TestDb& db, const std::string& tag, const std::vector<std::string>& args,
            const std::map<std::string, std::string>& env = {}) {
  pid_t pid = fork();
  if (pid == 0) {
    int out = open((db.dir() + "/" + tag + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open((db.dir() + "/" + tag + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<std::string> a{REWARDCTL_BIN, "--db", db.url()};
    a.insert(a.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// The budget's status log: each row starts where the previous ended (the first at normal), and the
// last ends at the stored step. Returns the rows as "from->to".
std::vector<std::string> continuous_moves(const TestDb& db) {
  auto st = db.open();
  auto r = st->query("SELECT from_state, to_state FROM status_log WHERE entity = 'budget' ORDER BY id");
  std::vector<std::string> out;
  std::string at = "normal";
  for (auto& row : r.rows) {
    CHECK(row.str(0) == at);
    at = row.str(1);
    out.push_back(row.str(0) + "->" + row.str(1));
  }
  CHECK(st->query("SELECT ladder_step FROM budget")[0].str(0) == at);
  return out;
}

// The stored thresholds and step are what the ratio and the authorised budget say they are.
void check_settled(const TestDb& db) {
  auto st = db.open();
  auto r = st->query("SELECT authorised_cents, consumed_cents, warn_ppm, degrade_ppm, stop_ppm, warn_cents, "
                     "degrade_cents, stop_cents, ladder_step FROM budget");
  REQUIRE(r.size() == 1);
  const auto& b = r[0];
  auto c = rc::thresholds(b.i64(0), {b.opt_i64(2), b.opt_i64(3), b.opt_i64(4)});
  CHECK(b.opt_i64(5) == c.warn);
  CHECK(b.opt_i64(6) == c.degrade);
  CHECK(b.opt_i64(7) == c.stop);
  CHECK(b.str(8) == rc::ladder_step_name(rc::step_for(b.i64(1), c)));
}

}  // namespace

TEST_CASE("ladder hostile: 16 processes crossing warn at once - one WARN line, one alert, one move") {
  TestDb db;
  db.migrate();
  seed(db, ladder_spec());
  claims(db, 48, "pre");  // 480 of 1000: two claims short of warn
  AlertSink sink;
  const auto env = sink.env(db);
  std::vector<pid_t> pids;
  for (int i = 0; i < 16; ++i)
    pids.push_back(spawn(db, "c" + std::to_string(i),
                         {"claim", "act", "--user", "p" + std::to_string(i), "--biz-id", "p" + std::to_string(i)}, env));
  int warn_lines = 0, granted = 0;
  for (int i = 0; i < 16; ++i) {
    int status = 0;
    waitpid(pids[size_t(i)], &status, 0);
    CHECK(WIFEXITED(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ++granted;
    std::string err = read_file(db.dir() + "/c" + std::to_string(i) + ".err");
    INFO(err);
    for (size_t at = err.find("warning: budget ladder"); at != std::string::npos;
         at = err.find("warning: budget ladder", at + 1))
      ++warn_lines;
  }
  auto alerts = sink.seen();
  CHECK(sink.bad_signatures == 0);
  CHECK(granted == 16);  // 480 + 160 = 640: past warn, short of degrade
  CHECK(warn_lines == 1);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0]["to"] == "warn");
  CHECK(alerts[0]["consumed_cents"] == 500);
  CHECK(continuous_moves(db) == std::vector<std::string>{"normal->warn"});
  check_settled(db);
}

TEST_CASE("ladder hostile: budget raises racing claims leave the step where the ratio is, its log continuous") {
  TestDb db;
  db.migrate();
  seed(db, ladder_spec());
  std::atomic<bool> stop{false};
  std::atomic<int> granted{0}, exhausted{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < 8; ++w)
    ts.emplace_back([&, w] {
      auto box = engine(db);
      for (int i = 0; !stop && i < 400; ++i) {
        auto out = rt::claim(*box.engine, "act", "w" + std::to_string(w) + "-" + std::to_string(i),
                             "w" + std::to_string(w) + "-" + std::to_string(i));
        if (out.status == rc::engine::Status::granted) ++granted;
        else if (out.reason == rc::engine::Reason::budget_exhausted) ++exhausted;
      }
    });
  {
    auto st = db.open();
    rc::activity::live::ChangeSpec c;
    c.kind = rc::activity::live::ChangeKind::budget_raise;
    c.code = "act";
    c.amount = 300;
    c.reason = "race";
    for (int i = 0; i < 6; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      auto r = rc::activity::live::request(*st, c, false, {"raiser", false}, 1'700'000'000'000);
      CHECK(r.state == rc::ChangeRequestState::applied);
    }
  }
  stop = true;
  for (auto& t : ts) t.join();
  CHECK(granted > 0);
  CHECK(db.count("SELECT authorised_cents FROM budget") == 1000 + 6 * 300);
  CHECK(db.count("SELECT consumed_cents FROM budget") == granted * 10);
  continuous_moves(db);
  check_settled(db);
}

TEST_CASE("ladder hostile: a claim killed with SIGKILL while it crosses warn moves nothing") {
  TestDb db;
  db.migrate();
  seed(db, ladder_spec());
  claims(db, 49, "pre");  // 490: the next claim crosses warn
  {
    // Hold the budget (PostgreSQL: its row; SQLite: the write lock) while a claim that would cross
    // warn runs into it; kill it there, then let go.
    auto st = db.open();
    st->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
      tx.exec("UPDATE budget SET consumed_cents = consumed_cents WHERE activity_id = (SELECT id FROM activity)");
      pid_t pid = spawn(db, "killed", {"claim", "act", "--user", "k", "--biz-id", "k"});
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      kill(pid, SIGKILL);
      int status = 0;
      waitpid(pid, &status, 0);
      CHECK(WIFSIGNALED(status));
      tx.rollback_only();
    });
  }
  CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = 'k'") == 0);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 490);
  CHECK(continuous_moves(db).empty());
  // the retry crosses, once
  auto r = db.ok({"claim", "act", "--user", "k", "--biz-id", "k"});
  CHECK(r.err.find("warning: budget ladder of act: normal -> warn") != std::string::npos);
  db.ok({"claim", "act", "--user", "k", "--biz-id", "k"});  // a replay: no second move
  CHECK(continuous_moves(db) == std::vector<std::string>{"normal->warn"});
  check_settled(db);
}

TEST_CASE("ladder hostile: an alert webhook that is down costs the crossing claim nothing but an error line") {
  TestDb db;
  db.migrate();
  seed(db, ladder_spec());
  claims(db, 49, "pre");
  // a port nobody listens on: the POST is refused
  std::string cfg = write_file(db.dir(), "down.toml",
                               "[alerts]\nwebhook = \"http://127.0.0.1:9/alert\"\nsecret = \"env:ALERT_SECRET\"\n"
                               "timeout_ms = 500\n");
  auto r = db.ok({"claim", "act", "--user", "x", "--biz-id", "x", "-o", "json"}, 0,
                 {{"REWARDCTL_CONFIG", cfg}, {"ALERT_SECRET", "s"}});
  CHECK(last_json(r)["outcome"] == "granted");
  CHECK(r.err.find("warning: budget ladder of act: normal -> warn") != std::string::npos);
  CHECK(r.err.find("alert to http://127.0.0.1:9/alert not delivered") != std::string::npos);
  CHECK(continuous_moves(db) == std::vector<std::string>{"normal->warn"});
  // the alert is kept for fuse-scan to retry
  CHECK(db.count("SELECT count(*) FROM alert_outbox WHERE state = 'pending' AND attempts = 1") == 1);
}
