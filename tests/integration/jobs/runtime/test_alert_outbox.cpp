// Alerts that survive a crash (core/alert_outbox.hpp): a fuse trip's and a budget ladder step's
// alert is queued in the transaction of the change, posted after its commit, and - when that post
// failed or the process died before it - posted by the next fuse-scan after the grace, once.
// Without an [alerts] webhook the alert is recorded as skipped.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/alert_outbox.hpp"
#include "support/alert_sink.hpp"
#include "support/jobs.hpp"
#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

rc::Millis at(const char* s) { return *rc::parse_rfc3339(s); }
const rc::Millis T = at("2026-06-01T12:00:00Z");

std::map<std::string, std::string> with_now(std::map<std::string, std::string> env, rc::Millis now) {
  env["REWARDCTL_NOW"] = rc::format_utc(now);
  return env;
}

// An [alerts] webhook on a port where nobody listens: every post is refused at once.
std::map<std::string, std::string> down_env(const TestDb& db) {
  return {{"REWARDCTL_CONFIG", write_file(db.dir(), "down.toml",
                                          "[alerts]\nwebhook = \"http://127.0.0.1:9/alert\"\n"
                                          "secret = \"env:ALERT_SECRET\"\ntimeout_ms = 500\n")},
          {"ALERT_SECRET", "alert-secret"}};
}

// An activity whose p1 trips a max_count rule of 2 once 3 claims are in its window.
void trip_setup(const TestDb& db) {
  db.migrate();
  Spec s;
  s.extra = "[[fuse]]\nname = \"r\"\nprize = \"p1\"\nwindow_seconds = 600\nmax_count = 2\n";
  seed(db, s);
  auto box = engine(db, T - 60'000);
  for (int i = 0; i < 3; ++i)
    REQUIRE(claim(*box.engine, "act", "u" + std::to_string(i), "b" + std::to_string(i)).status ==
            rc::engine::Status::granted);
}

int64_t alerts_in(const TestDb& db, const std::string& state) {
  return db.count("SELECT count(*) FROM alert_outbox WHERE state = $1", {state});
}

// A listener that accepts connections and never answers: a post to it hangs until its timeout.
struct Silent {
  int fd = -1, port = 0;
  Silent() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t n = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
    REQUIRE(listen(fd, 16) == 0);
  }
  ~Silent() { close(fd); }
};

// A live activity `act` with a budget of 100 cents, 50 cents a claim, and the ladder `ratios`
// (a [budget] table body): each claim crosses a step.
void seed_small_ladder(const TestDb& db, const std::string& ratios) {
  db.migrate();
  Spec s;
  s.budget = 100;
  s.item_kind = "cash";
  s.unit_cost = 1;
  s.amount = 50;
  s.extra = "[budget]\n" + ratios;
  seed(db, s);
}

}  // namespace

TEST_CASE("alerts: a fuse trip's alert is queued with its event, posted once and signed") {
  TestDb db;
  trip_setup(db);
  AlertSink sink;
  db.ok({"fuse-scan"}, 1, with_now(sink.env(db), T));
  auto seen = sink.seen();
  REQUIRE(seen.size() == 1);
  CHECK(sink.bad_signatures == 0);
  CHECK(seen[0]["alert"] == "fuse_tripped");
  CHECK(seen[0]["activity"] == "act");
  CHECK(seen[0]["prize"] == "p1");
  CHECK(seen[0]["kind"] == "max_count");
  CHECK(seen[0]["observed_count"] == 3);
  CHECK(seen[0]["event"] == db.open()->query("SELECT batch_no FROM fuse_event")[0].str(0));
  CHECK(seen[0]["alert_id"] == db.count("SELECT id FROM alert_outbox"));
  CHECK(alerts_in(db, "sent") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'alert' AND from_state = 'pending' AND "
                 "to_state = 'sent'") == 1);
  // later runs, past the grace: nothing is posted twice
  db.ok({"fuse-scan"}, 0, with_now(sink.env(db), T + 120'000));
  CHECK(sink.seen().size() == 1);
}

TEST_CASE("alerts: a trip whose webhook is down stays pending, and a fuse-scan after the grace posts it once") {
  TestDb db;
  trip_setup(db);
  auto r = db.ok({"fuse-scan"}, 1, with_now(down_env(db), T));
  CHECK(r.err.find("fuse_tripped alert") != std::string::npos);
  CHECK(r.err.find("not sent (fuse-scan retries it)") != std::string::npos);
  CHECK(alerts_in(db, "pending") == 1);
  CHECK(db.count("SELECT attempts FROM alert_outbox") == 1);
  CHECK(db.count("SELECT count(*) FROM alert_outbox WHERE last_error IS NOT NULL") == 1);

  AlertSink sink;
  // within the grace the alert is left to the process that queued it
  db.ok({"fuse-scan"}, 0, with_now(sink.env(db), T + 30'000));
  CHECK(sink.seen().empty());
  // a dry run past the grace names it and posts nothing
  auto dry = db.ok({"fuse-scan", "--dry-run"}, 0, with_now(sink.env(db), T + 120'000));
  CHECK(dry.err.find("1 pending alert(s) would be posted") != std::string::npos);
  CHECK(sink.seen().empty());
  CHECK(alerts_in(db, "pending") == 1);
  // past the grace: posted, once
  auto later = db.ok({"fuse-scan", "-o", "json"}, 0, with_now(sink.env(db), T + 120'000));
  INFO(later.all());
  REQUIRE(sink.seen().size() == 1);
  CHECK(sink.seen()[0]["alert"] == "fuse_tripped");
  CHECK(alerts_in(db, "sent") == 1);
  CHECK(db.count("SELECT attempts FROM alert_outbox") == 2);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE job = 'fuse-scan'") >= 3);
  db.ok({"fuse-scan"}, 0, with_now(sink.env(db), T + 240'000));
  CHECK(sink.seen().size() == 1);
}

TEST_CASE("alerts: a claim killed with SIGKILL while it posts its ladder alert loses no alert") {
  TestDb db;
  db.migrate();
  Spec s;
  s.budget = 1000;
  s.item_kind = "cash";
  s.unit_cost = 1;
  s.amount = 10;
  s.stock = 1000;
  s.extra = "[budget]\nwarn_at = 0.5\n";
  seed(db, s);
  {
    auto box = engine(db);
    for (int i = 0; i < 49; ++i)
      REQUIRE(claim(*box.engine, "act", "p" + std::to_string(i), "p" + std::to_string(i)).status ==
              rc::engine::Status::granted);
  }
  Silent silent;
  const std::string cfg =
      write_file(db.dir(), "silent.toml",
                 "[alerts]\nwebhook = \"http://127.0.0.1:" + std::to_string(silent.port) +
                     "/alert\"\nsecret = \"env:ALERT_SECRET\"\ntimeout_ms = 60000\n");
  pid_t pid = spawn(db, {"claim", "act", "--user", "k", "--biz-id", "k"},
                    {{"REWARDCTL_CONFIG", cfg}, {"ALERT_SECRET", "alert-secret"}});
  // the claim commits its grant, its step and its alert together, then hangs on the silent webhook
  const bool committed = wait_for(db, "SELECT count(*) FROM alert_outbox", 1);
  REQUIRE(committed);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = 'k' AND state = 'success'") == 1);
  CHECK(db.count("SELECT count(*) FROM budget WHERE ladder_step = 'warn'") == 1);
  CHECK(alerts_in(db, "pending") == 1);

  AlertSink sink;
  const rc::Millis made = db.count("SELECT created_at FROM alert_outbox");
  db.ok({"fuse-scan"}, 0, with_now(sink.env(db), made + 91'000));
  auto seen = sink.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0]["alert"] == "budget_ladder");
  CHECK(seen[0]["from"] == "normal");
  CHECK(seen[0]["to"] == "warn");
  CHECK(seen[0]["consumed_cents"] == 500);
  CHECK(alerts_in(db, "sent") == 1);
  db.ok({"fuse-scan"}, 0, with_now(sink.env(db), made + 200'000));
  CHECK(sink.seen().size() == 1);
}

TEST_CASE("alerts: a claim without an [alerts] webhook leaves its alert to fuse-scan, whose configuration decides") {
  TestDb db;
  seed_small_ladder(db, "warn_at = 0.5\nstop_at = 1\n");
  auto r = db.ok({"claim", "act", "--user", "u", "--biz-id", "b"});
  CHECK(r.err.find("warning: budget ladder of act: normal -> warn") != std::string::npos);
  CHECK(alerts_in(db, "pending") == 1);
  CHECK(db.count("SELECT attempts FROM alert_outbox") == 0);
  const rc::Millis made = db.count("SELECT created_at FROM alert_outbox");
  // a fuse-scan with a webhook posts it
  AlertSink sink;
  db.ok({"fuse-scan"}, 0, with_now(sink.env(db), made + 120'000));
  REQUIRE(sink.seen().size() == 1);
  CHECK(sink.seen()[0]["to"] == "warn");
  // a second crossing (to stop) with fuse-scan run without a webhook either: recorded as skipped
  db.ok({"claim", "act", "--user", "v", "--biz-id", "c"});
  CHECK(alerts_in(db, "pending") == 1);
  db.ok({"fuse-scan"}, 0, {{"REWARDCTL_NOW", rc::format_utc(made + 240'000)}});
  CHECK(alerts_in(db, "skipped") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'alert' AND to_state = 'skipped' AND "
                 "reason = 'no [alerts] webhook configured'") == 1);
  CHECK(sink.seen().size() == 1);
}

TEST_CASE("alerts: a broken [alerts] table never stops a claim, and its alert waits for a fuse-scan that can post") {
  TestDb db;
  seed_small_ladder(db, "warn_at = 0.5\n");
  const std::map<std::string, std::string> bad{
      {"REWARDCTL_CONFIG", write_file(db.dir(), "bad.toml", "[alerts]\nwebhook = \"http://127.0.0.1:9/a\"\n"
                                                            "secret = \"env:ALERT_SECRET\"\ntimeout_ms = 0\n")},
      {"ALERT_SECRET", "alert-secret"}};
  auto r = db.ok({"claim", "act", "--user", "u", "--biz-id", "b", "-o", "json"}, 0, bad);
  CHECK(last_json(r)["outcome"] == "granted");
  CHECK(alerts_in(db, "pending") == 1);
  // fuse-scan refuses the broken table (78), so the cron wrapper reports it; nothing is posted
  auto f = db.ok({"fuse-scan"}, 78, bad);
  CHECK(f.err.find("timeout_ms") != std::string::npos);
  CHECK(alerts_in(db, "pending") == 1);
  AlertSink sink;
  db.ok({"fuse-scan"}, 0, with_now(sink.env(db), db.count("SELECT created_at FROM alert_outbox") + 120'000));
  CHECK(sink.seen().size() == 1);
}

TEST_CASE("alerts: fuse-scan checks its rules before old alerts, and gives an alert up after 20 refusals") {
  TestDb db;
  trip_setup(db);
  // an old alert that the webhook keeps refusing, 19 times already
  {
    auto st = db.open();
    st->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
      rc::queue_alert(tx, "budget_ladder", std::nullopt, json{{"note", "old"}}, T - 600'000);
      tx.exec("UPDATE alert_outbox SET attempts = 19");
    });
  }
  // the webhook is down: the rule still trips (exit 1), its own alert is queued and refused, and the
  // old one is given up
  auto r = db.ok({"fuse-scan"}, 1, with_now(down_env(db), T));
  INFO(r.all());
  CHECK(db.count("SELECT count(*) FROM fuse_event") == 1);
  CHECK(db.count("SELECT count(*) FROM alert_outbox WHERE kind = 'budget_ladder' AND state = 'failed'") == 1);
  CHECK(db.count("SELECT attempts FROM alert_outbox WHERE kind = 'budget_ladder'") == 20);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'alert' AND from_state = 'pending' AND "
                 "to_state = 'failed'") == 1);
  CHECK(r.err.find("given up after 20 attempts") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM alert_outbox WHERE kind = 'fuse_tripped' AND state = 'pending'") == 1);
  // --max-runtime 0 would stop before any work: the rules come first, so a run limited to its rules
  // (--limit 1, one rule) posts no old alert at all
  AlertSink sink;
  db.ok({"fuse-scan", "--limit", "1"}, 0, with_now(sink.env(db), T + 120'000));
  CHECK(sink.seen().empty());
  db.ok({"fuse-scan"}, 0, with_now(sink.env(db), T + 120'000));
  REQUIRE(sink.seen().size() == 1);
  CHECK(sink.seen()[0]["alert"] == "fuse_tripped");
}

TEST_CASE("alerts: reconcile follows the budget ladder's and the alerts' status-log chains") {
  TestDb db;
  seed_small_ladder(db, "warn_at = 0.5\n");
  AlertSink sink;
  db.ok({"claim", "act", "--user", "u", "--biz-id", "b"}, 0, sink.env(db));
  REQUIRE(sink.seen().size() == 1);
  db.ok({"reconcile", "--checks", "status_log"});
  auto diffs = [&](const std::string& entity, const std::string& key) {
    auto r = db.ok({"reconcile", "--checks", "status_log", "-o", "json"}, 1);
    int n = 0;
    for (auto& l : lines(r.out)) {
      auto j = json::parse(l);
      if (j["type"] == "diff" && j["entity"] == entity && j["key"] == key) ++n;
    }
    return n;
  };
  auto st = db.open();
  // a step moved without its log row
  st->exec("UPDATE budget SET ladder_step = 'degrade'");
  CHECK(diffs("budget", "act") == 1);
  st->exec("UPDATE budget SET ladder_step = 'warn'");
  // an alert marked sent without its log row
  st->exec("DELETE FROM status_log WHERE entity = 'alert' AND to_state = 'sent'");
  CHECK(diffs("alert", "alert " + std::to_string(db.count("SELECT id FROM alert_outbox"))) == 1);
  st->exec("UPDATE alert_outbox SET state = 'pending'");
  db.ok({"reconcile", "--checks", "status_log"});
}
