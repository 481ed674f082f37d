// Webhook delivery end to end: the real binary claims and delivers to a local HTTP endpoint that
// verifies the signature. Timeouts and retryable errors go to delayed_resend with the same bill
// number; final errors fail the grant.
#include <doctest/doctest.h>
#include <httplib.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "util/hash.hpp"
#include "support/seed.hpp"
#include "support/webhook_endpoint.hpp"

using namespace rt;
using nlohmann::json;

namespace {

const char* kSecret = rt::kHookSecret;
using rt::Endpoint;

std::string config(const TestDb& db, int port) { return rt::webhook_config(db, port); }
rc::engine::EngineOptions engine_options(const std::string& cfg) { return rt::webhook_engine_options(cfg); }

}  // namespace

TEST_CASE("webhook: success, retryable, final and timeout, with the signature verified by the server") {
  TestDb db;
  db.migrate();
  Endpoint ep;
  std::string cfg = config(db, ep.port);
  std::map<std::string, std::string> env{{"HOOK_SECRET", kSecret}, {"REWARDCTL_CONFIG", cfg}};
  Spec s;
  s.channel = "wallet";
  s.item_kind = "points";
  s.unit_cost = 1;
  s.amount = 50;
  seed(db, s, env);
  auto claim_state = [&](const std::string& user, const std::string& biz) {
    auto r = db.ok({"claim", "act", "--user", user, "--biz-id", biz, "-o", "json"}, 0, env);
    return json::parse(r.out);
  };

  SUBCASE("success") {
    auto j = claim_state("u1", "b1");
    CHECK(j["state"] == "success");
    CHECK(ep.bills.size() == 1);
    CHECK(ep.bills[0] == j["bill_no"]);
    CHECK(ep.bad_signatures == 0);
    CHECK(db.count("SELECT count(*) FROM delivery_bill WHERE state = 'success'") == 1);
  }
  SUBCASE("retryable error -> delayed_resend with a resend bill") {
    ep.set("retry");
    auto j = claim_state("u1", "b1");
    CHECK(j["state"] == "delayed_resend");
    CHECK(db.count("SELECT count(*) FROM resend_bill WHERE state = 'pending' AND bill_no = (SELECT bill_no FROM grants)") == 1);
  }
  SUBCASE("final error -> failed") {
    ep.set("final");
    auto j = claim_state("u1", "b1");
    CHECK(j["state"] == "failed");
    CHECK(db.count("SELECT count(*) FROM resend_bill WHERE state = 'manual'") == 1);
    CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'resend_bill' AND to_state = 'manual'") == 1);
    CHECK(db.count("SELECT count(*) FROM grants WHERE reason LIKE '%2001%'") == 1);
  }
  SUBCASE("timeout -> delayed_resend; the resend carries the same bill number") {
    ep.set("timeout");
    auto j = claim_state("u1", "b1");
    CHECK(j["state"] == "delayed_resend");
    std::string bill = j["bill_no"];
    CHECK(db.count("SELECT count(*) FROM resend_bill WHERE bill_no = $1", {bill}) == 1);
    // the resend: deliver the same grant again, now the endpoint answers in time
    ep.set("ok");
    auto o = engine_options(cfg);
    auto b = engine(db, std::nullopt, o);
    int64_t gid = db.count("SELECT id FROM grants");
    auto d = b.engine->deliver(gid);
    CHECK(d.state == rc::GrantState::success);
    REQUIRE(ep.bills.size() == 2);
    CHECK(ep.bills[0] == bill);
    CHECK(ep.bills[1] == bill);
    CHECK(db.count("SELECT count(*) FROM delivery_bill") == 1);
    CHECK(db.count("SELECT attempts FROM delivery_bill") == 2);
    CHECK(db.count("SELECT count(*) FROM resend_bill WHERE state = 'done'") == 1);
  }
  SUBCASE("a wrong secret is refused by the server: final") {
    env["HOOK_SECRET"] = "not-the-secret";
    auto j = claim_state("u1", "b1");
    CHECK(j["state"] == "failed");
    CHECK(ep.bad_signatures == 1);
  }
}

TEST_CASE("webhook: a process killed during the call leaves a due resend with the same bill number") {
  TestDb db;
  db.migrate();
  Endpoint ep;
  ep.set("timeout");  // the endpoint answers after 1.5 s; the claim is killed before that
  std::string cfg = write_file(db.dir(), "rewardctl.toml",
                               "[channels.wallet]\ntype = \"webhook\"\nurl = \"http://127.0.0.1:" + std::to_string(ep.port) +
                                   "/deliver\"\nsecret = \"env:HOOK_SECRET\"\ntimeout_ms = 10000\n");
  std::map<std::string, std::string> env{{"HOOK_SECRET", kSecret}, {"REWARDCTL_CONFIG", cfg}};
  Spec s;
  s.channel = "wallet";
  seed(db, s, env);
  // run the claim in a child process and SIGKILL it while it waits for the endpoint
  pid_t pid = fork();
  if (pid == 0) {
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execl(REWARDCTL_BIN, REWARDCTL_BIN, "--db", db.url().c_str(), "-q", "claim", "act", "--user", "u1", "--biz-id", "b1",
          (char*)nullptr);
    _exit(127);
  }
  for (int i = 0; i < 400 && ep.bills.empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(ep.bills.size() == 1);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'issuing'") == 1);
  CHECK(db.count("SELECT count(*) FROM resend_bill WHERE state = 'pending' AND bill_no = $1", {ep.bills[0]}) == 1);
  // Before the resend is due nobody takes the delivery over; after it, a resend with the same bill.
  ep.set("ok");
  auto o = engine_options(cfg);
  int64_t gid = db.count("SELECT id FROM grants");
  auto early = engine(db, std::nullopt, o);
  CHECK_FALSE(early.engine->deliver(gid).delivered_now);
  int64_t due = db.count("SELECT next_attempt_at FROM resend_bill");
  auto late = engine(db, due + 1, o);
  auto d = late.engine->deliver(gid);
  CHECK(d.delivered_now);
  CHECK(d.state == rc::GrantState::success);
  REQUIRE(ep.bills.size() == 2);
  CHECK(ep.bills[1] == ep.bills[0]);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND from_state = 'issuing' AND to_state = 'delayed_resend'") == 1);
  CHECK(db.count("SELECT count(*) FROM resend_bill WHERE state = 'done'") == 1);
  CHECK(db.count("SELECT count(*) FROM delivery_bill") == 1);
}
