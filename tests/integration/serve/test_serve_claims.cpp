// serve under concurrent callers and for every refusal: exact counts in the database, the
// documented code for each reason word.
#include <doctest/doctest.h>

#include <atomic>
#include <set>
#include <thread>

#include "serve/api.hpp"
#include "support/seed.hpp"
#include "support/serve.hpp"
#include "support/webhook_endpoint.hpp"

using namespace rt;
using nlohmann::json;

namespace {

std::string claim_body(const std::string& activity, const std::string& user, const std::string& biz) {
  return json{{"activity", activity}, {"user", user}, {"biz_id", biz}}.dump();
}

// n threads, each on its own connection, released together; fn(i) returns what to post.
std::vector<ServeProc::Answer> all_at_once(const ServeProc& srv, int n, const std::string& path,
                                           const std::function<std::string(int)>& body) {
  std::vector<ServeProc::Answer> out(static_cast<size_t>(n));
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      auto c = srv.client();
      c->Get("/healthz");  // connected before the start
      ++ready;
      while (ready.load() < n) std::this_thread::yield();
      auto r = c->Post(path.c_str(), body(i), "application/json");
      if (r) {
        out[size_t(i)].http = r->status;
        out[size_t(i)].body = json::parse(r->body, nullptr, false);
      }
    });
  for (auto& t : ts) t.join();
  return out;
}

}  // namespace

TEST_CASE("serve: 64 concurrent connections against a stock of 50 grant exactly 50, the rest sold_out") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 50;
  seed(db, s);
  ServeProc srv(db, {"--threads", "16"}, kPatientQueue);  // counts stock, not overload
  auto answers = all_at_once(srv, 64, "/v1/claims",
                             [](int i) { return claim_body("act", "u" + std::to_string(i), "b" + std::to_string(i)); });
  int ok = 0, sold = 0;
  for (auto& a : answers) {
    REQUIRE(a.http == 200);
    if (a.body["code"] == 0) ++ok;
    else if (a.body["code"] == 1011 && a.body["data"]["reason"] == "sold_out") ++sold;
  }
  CHECK(ok == 50);
  CHECK(sold == 14);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 50);
  CHECK(db.count("SELECT count(*) FROM grants") == 50);
  CHECK(db.count("SELECT SUM(remain) FROM stock") == 0);
  CHECK(srv.stop() == 0);
}

TEST_CASE("serve: one bizId sent 30 times at once makes one grant and 29 replays of the same claimId") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  ServeProc srv(db, {}, kPatientQueue);  // counts replays, not overload
  auto answers = all_at_once(srv, 30, "/api/receive", [](int) {
    return json{{"activityCode", "act"}, {"userId", 10001}, {"bizId", "click-10001-same"}, {"channel", "APP"}}.dump();
  });
  std::set<std::string> ids;
  int fresh = 0, replays = 0;
  for (auto& a : answers) {
    REQUIRE(a.http == 200);
    REQUIRE(a.body["code"] == 0);
    ids.insert(a.body["data"]["claimId"].get<std::string>());
    (a.body["data"]["replayed"] == true ? replays : fresh)++;
  }
  CHECK(ids.size() == 1);
  CHECK(fresh == 1);
  CHECK(replays == 29);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 1);
  CHECK(srv.stop() == 0);
}

TEST_CASE("serve: every refusal reachable over HTTP answers its documented code, HTTP 200, nothing granted") {
  TestDb db;
  db.migrate();
  auto mk = [&](const std::string& code, const std::function<void(Spec&)>& f) {
    Spec s;
    s.code = code;
    f(s);
    seed(db, s);
  };
  mk("live", [](Spec& s) { s.limit = 1; });
  mk("later", [](Spec& s) { s.start = "2098-01-01T00:00:00+08:00"; });
  mk("over", [](Spec& s) { s.start = "2020-01-01T00:00:00+08:00", s.end = "2021-01-01T00:00:00+08:00"; });
  mk("paused", [](Spec&) {});
  db.ok({"activity", "pause", "paused"});
  mk("white", [](Spec& s) { s.whitelist = true; });
  mk("black", [](Spec& s) { s.black = "\"bad\""; });
  mk("empty", [](Spec& s) { s.stock = 0; });
  mk("poor", [](Spec& s) { s.budget = 50, s.unit_cost = 100; });
  mk("fused", [](Spec&) {});
  db.ok({"fuse", "block", "fused", "--reason", "ops saw a wrong amount"});
  {  // created, never published: not live
    Spec s;
    s.code = "draft";
    db.ok({"activity", "create", "-f", write_file(db.dir(), "draft.toml", definition(s)), "--operator", "alice"});
  }
  {  // gray: only the gray list
    Spec s;
    s.code = "gray";
    s.gray = "\"qa\"";
    db.ok({"activity", "create", "-f", write_file(db.dir(), "gray.toml", definition(s)), "--operator", "alice"});
    db.ok({"activity", "approve", "gray", "--as", "product", "--operator", "bob"});
    db.ok({"activity", "approve", "gray", "--as", "tech", "--operator", "carol"});
    db.ok({"activity", "publish", "gray", "--gray"});
  }
  auto st = db.open();
  int64_t white = db.count("SELECT id FROM activity WHERE code = 'white'");
  st->exec("INSERT INTO qualification (activity_id, user_id, status, created_at, updated_at) VALUES ($1, 'q1', 'unused', 0, 0)",
           {white});

  ServeProc srv(db);
  auto code = [&](const std::string& activity, const std::string& user, const std::string& biz) {
    auto a = srv.post("/v1/claims", claim_body(activity, user, biz));
    REQUIRE(a.http == 200);
    return a.body;
  };
  auto expect = [&](const json& body, rc::Reason r) {
    CHECK(body["code"] == rc::serve::code_of(r).code);
    CHECK(body["data"]["reason"] == rc::name(r));
  };
  expect(code("nope", "u", "k1"), rc::Reason::not_found);
  expect(code("draft", "u", "k2"), rc::Reason::not_live);
  expect(code("later", "u", "k3"), rc::Reason::not_started);
  expect(code("over", "u", "k4"), rc::Reason::ended);
  expect(code("paused", "u", "k5"), rc::Reason::paused);
  expect(code("gray", "someone", "k6"), rc::Reason::not_in_gray_list);
  expect(code("white", "nobody", "k7"), rc::Reason::not_qualified);
  CHECK(code("white", "q1", "k8")["code"] == 0);
  expect(code("white", "q1", "k9"), rc::Reason::qualification_used);
  expect(code("black", "bad", "k10"), rc::Reason::blacklisted);
  CHECK(code("live", "u", "k11")["code"] == 0);
  expect(code("live", "u", "k12"), rc::Reason::limit_reached);
  expect(code("empty", "u", "k13"), rc::Reason::sold_out);
  expect(code("poor", "u", "k14"), rc::Reason::budget_exhausted);
  expect(code("live", "someone-else", "k11"), rc::Reason::biz_id_conflict);
  // a held request is its own answer, never a failure: the pending grant is named
  auto held = code("fused", "u", "k15");
  expect(held, rc::Reason::held_by_fuse);
  CHECK(held["data"]["state"] == "pending");
  CHECK(!held["data"]["record_code"].get<std::string>().empty());
  // the seeds' endpoints answer the same codes
  auto r = srv.post("/api/receive", json{{"activityCode", "empty"}, {"userId", 7}, {"bizId", "k16"}}.dump());
  CHECK(r.body["code"] == 1011);
  CHECK(r.body["data"].is_null());
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 2);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'pending'") == 1);
  // the read endpoint: the grant of a biz id, or 404 with its own code
  auto g = srv.get("/v1/grants/k11");
  CHECK(g.http == 200);
  CHECK(g.body["data"]["activity"] == "live");
  auto missing = srv.get("/v1/grants/never-sent");
  CHECK(missing.http == 404);
  CHECK(missing.body["code"] == 4041);
  CHECK(srv.stop() == 0);
}

TEST_CASE("serve: the seeds' red packet and lottery contracts") {
  TestDb db;
  db.migrate();
  seed(db, redpack(100000, 100, 300));
  Spec l;
  l.code = "draw";
  l.kind = "lottery";
  l.custom_prizes = true;
  l.extra = "[[prizes]]\ncode = \"big\"\nitem = \"thing\"\namount = 1\nstock = 5\nweight = 1000000\n"
            "[[prizes]]\ncode = \"thanks\"\nitem = \"thing\"\namount = 1\nstock = 1000\nweight = 1\n"
            "[lottery]\nconsolation = \"thanks\"\n";
  seed(db, l);
  std::string rp = db.open()->query("SELECT code FROM activity WHERE kind = 'redpack'")[0].str(0);
  ServeProc srv(db);
  SUBCASE("redpack: without requestId the key is userId_batchId_instanceId, and a retry replays") {
    auto a = srv.post("/api/v1/redpack/claim", json{{"batchId", rp}, {"instanceId", 3}, {"userId", 42}}.dump());
    REQUIRE(a.body["code"] == 0);
    int64_t amount = a.body["data"]["amount"];
    CHECK(amount >= 100);
    CHECK(amount <= 300);
    CHECK(a.body["data"]["requestId"] == "42_" + rp + "_3");
    auto again = srv.post("/api/v1/redpack/claim", json{{"batchId", rp}, {"instanceId", 3}, {"userId", 42}}.dump());
    CHECK(again.body["data"]["replayed"] == true);
    CHECK(again.body["data"]["claimId"] == a.body["data"]["claimId"]);
    CHECK(again.body["data"]["amount"] == amount);
    CHECK(db.count("SELECT count(*) FROM grants") == 1);
  }
  SUBCASE("lottery: the user from X-User-Id, the prize and whether it was the consolation") {
    auto a = srv.post("/api/lottery/draw", json{{"activityCode", "draw"}, {"requestId", "d1"}}.dump(), {{"X-User-Id", "u7"}});
    REQUIRE(a.body["code"] == 0);
    CHECK(a.body["data"]["prizeCode"] == "big");  // weight 1000000 against 1
    CHECK(a.body["data"]["consolation"] == false);
    CHECK(a.body["data"]["prizeKind"] == "coupon");
    auto no_user = srv.post("/api/lottery/draw", json{{"activityCode", "draw"}, {"requestId", "d2"}}.dump());
    CHECK(no_user.http == 400);
    CHECK(no_user.body["message"].get<std::string>().find("X-User-Id") != std::string::npos);
    CHECK(db.count("SELECT count(*) FROM grants WHERE user_id = 'u7'") == 1);
  }
  CHECK(srv.stop() == 0);
}

TEST_CASE("serve: the per-user rate answers 429 with the seed's message and writes nothing") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  ServeProc srv(db, {}, "user_rate = 1\nuser_burst = 2\nlocale = \"zh\"");
  int ok = 0, limited = 0;
  for (int i = 0; i < 6; ++i) {
    auto a = srv.post("/v1/claims", claim_body("act", "fast", "r" + std::to_string(i)));
    if (a.http == 200 && a.body["code"] == 0) ++ok;
    if (a.http == 429) {
      ++limited;
      CHECK(a.body["code"] == 4290);
      CHECK(a.body["message"] == "系统繁忙，请稍后再试");
    }
  }
  CHECK(ok >= 2);
  CHECK(ok <= 3);  // a burst of 2, plus at most one token refilled while the loop ran
  CHECK(ok + limited == 6);
  CHECK(db.count("SELECT count(*) FROM grants") == ok);
  // another user is not limited by this one
  CHECK(srv.post("/v1/claims", claim_body("act", "calm", "c1")).body["code"] == 0);
  auto m = srv.get("/metrics");
  CHECK(m.http == 200);
  CHECK(m.raw.find("rewardctl_serve_requests_total{endpoint=\"claims\",code=\"4290\",http=\"429\"}") != std::string::npos);
  CHECK(m.raw.find("rewardctl_serve_grants_total{activity=\"act\",outcome=\"granted\",state=\"success\"}") != std::string::npos);
  CHECK(srv.get("/readyz").http == 200);
  CHECK(srv.get("/healthz").http == 200);
  CHECK(srv.stop() == 0);
}

TEST_CASE("serve: with every worker busy past queue_timeout_ms a request is 503 with Retry-After and writes nothing") {
  TestDb db;
  db.migrate();
  rt::Endpoint ep;  // the webhook channel's peer, answering ok after 800 ms: the one worker stays busy
  ep.ok_delay_ms = 800;
  std::map<std::string, std::string> env{{"HOOK_SECRET", rt::kHookSecret}};
  std::string channel = "[channels.wallet]\ntype = \"webhook\"\nurl = \"http://127.0.0.1:" + std::to_string(ep.port) +
                        "/deliver\"\nsecret = \"env:HOOK_SECRET\"\ntimeout_ms = 3000\n";
  auto cfg = write_file(db.dir(), "seed.toml", channel);
  env["REWARDCTL_CONFIG"] = cfg;
  Spec s;
  s.channel = "wallet";
  s.item_kind = "points";
  s.unit_cost = 1;
  seed(db, s, env);
  ServeProc srv(db, {"--threads", "1"}, "queue_timeout_ms = 100\n" + channel, {{"HOOK_SECRET", rt::kHookSecret}});
  ServeProc::Answer slow, busy;
  std::thread t([&] { slow = srv.post("/v1/claims", claim_body("act", "u1", "slow-1")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the first holds the only worker now
  busy = srv.post("/v1/claims", claim_body("act", "u2", "busy-1"));
  t.join();
  CHECK(slow.http == 200);
  CHECK(slow.body["code"] == 0);
  CHECK(slow.body["data"]["state"] == "success");  // delivered through the webhook before the answer
  CHECK(busy.http == 503);
  CHECK(busy.body["code"] == 5030);
  CHECK(busy.headers["Retry-After"] == "1");
  CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = 'busy-1'") == 0);
  // the caller retries with the same key once the worker is free
  auto again = srv.post("/v1/claims", claim_body("act", "u2", "busy-1"));
  CHECK(again.body["code"] == 0);
  CHECK(db.count("SELECT count(*) FROM grants") == 2);
  CHECK(ep.seen().size() == 2);
  CHECK(srv.stop() == 0);
}
