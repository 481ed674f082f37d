// rewardctl expire on the backend under test: what falls due changes once (twice = once), the dry
// run reports the real run's counts and changes nothing, an ended activity leaves a settlement, and
// two runs at once still change each row once.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "support/jobs.hpp"
#include "support/seed.hpp"

using nlohmann::json;
using rt::TestDb;

namespace {

const std::map<std::string, std::string> kLater{{"REWARDCTL_NOW", "2031-01-01T00:00:00Z"}};
const int64_t kDue = 1893456000000;      // 2030-01-01, before kLater
const int64_t kNotDue = 2208988800000;   // 2040-01-01

// Everything expire may touch, as one comparable snapshot.
std::string snapshot(const TestDb& db) {
  auto s = db.open();
  std::string out;
  for (const char* q : {"SELECT code, state FROM activity ORDER BY code",
                        "SELECT user_id, status FROM qualification ORDER BY user_id",
                        "SELECT biz_id, state FROM grants ORDER BY biz_id",
                        "SELECT prize_id, bucket, remain FROM stock ORDER BY prize_id, bucket",
                        "SELECT activity_id, consumed_cents FROM budget ORDER BY activity_id",
                        "SELECT scope, user_id, used FROM limit_counter ORDER BY scope, user_id",
                        "SELECT count(*) FROM status_log", "SELECT count(*) FROM audit"})
    for (auto& row : s->query(q).rows) {
      for (size_t i = 0; i < row.cells.size(); ++i) out += row.str_or(i, "NULL") + "|";
      out += "\n";
    }
  return out;
}

// Three activities past their end (live with claims, paused, gray), one still running; due and
// not-due qualifications; one held (pending) grant past its expiry.
void world(const TestDb& db) {
  rt::Spec s;
  s.code = "live_one";
  s.end = "2030-06-01T00:00:00+08:00";
  s.budget = 100000;
  s.limit = 1;
  s.stock = 10;
  rt::seed(db, s);
  auto box = rt::engine(db);
  for (int i = 0; i < 3; ++i) {
    auto o = rt::claim(*box.engine, "live_one", "u" + std::to_string(i), "b" + std::to_string(i));
    REQUIRE(o.status == rc::engine::Status::granted);
  }
  rt::make_activity(db, "paused_one", "paused", kDue);
  rt::make_activity(db, "gray_one", "gray", kDue);
  rt::make_activity(db, "running", "live", kNotDue);
  rt::add_due_qualifications(db, "running", 25, kDue, "due");
  rt::add_due_qualifications(db, "running", 5, kNotDue, "later");
  db.open()->exec(
      "INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state, expires_at, "
      "created_at, updated_at) SELECT 'Rheld', 'held1', a.id, p.id, 'h1', 1, 100, 'pending', CAST($1 AS BIGINT), 0, 0 "
      "FROM activity a JOIN prize p ON p.activity_id = a.id WHERE a.code = 'running'",
      {kDue});
  db.open()->exec(
      "INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, created_at) "
      "SELECT 'grant', id, NULL, 'pending', 'test', 'held_by_fuse', 0 FROM grants WHERE biz_id = 'held1'");
}

}  // namespace

TEST_CASE("expire: the dry run reports the real counts and changes nothing, the run changes each row once, twice = once") {
  TestDb db;
  db.migrate();
  world(db);
  const std::string before = snapshot(db);
  const int64_t stock_before = db.count("SELECT sum(remain) FROM stock");

  auto dry = rt::last_json(db.ok({"expire", "--dry-run", "-o", "json", "--chunk-size", "4"}, 0, kLater));
  CHECK(dry["state"] == "dry_run");
  CHECK(dry["run_id"].is_null());
  CHECK(snapshot(db) == before);
  CHECK(db.count("SELECT count(*) FROM job_run") == 0);

  auto run = rt::last_json(db.ok({"expire", "-o", "json", "--chunk-size", "4"}, 0, kLater));
  CHECK(run["state"] == "done");
  CHECK(run["counts"] == dry["counts"]);
  CHECK(run["counts"]["activities_ended"] == 3);
  CHECK(run["counts"]["qualifications_expired"] == 25);
  CHECK(run["counts"]["grants_expired"] == 1);
  CHECK(db.count("SELECT count(*) FROM activity WHERE state = 'ended'") == 3);
  CHECK(db.count("SELECT count(*) FROM activity WHERE code = 'running' AND state = 'live'") == 1);
  CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'expired'") == 25);
  CHECK(db.count("SELECT count(*) FROM qualification WHERE status = 'unused' AND user_id LIKE 'later%'") == 5);
  CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = 'held1' AND state = 'expired'") == 1);
  // one status-log row per change, from the state the row was in
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'activity' AND to_state = 'ended'") == 3);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'activity' AND to_state = 'ended' AND from_state = 'paused'") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'qualification' AND from_state = 'unused' AND to_state = 'expired'") == 25);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND from_state = 'pending' AND to_state = 'expired'") == 1);
  // ending gives nothing back: stock, budget and limit counts are what the claims left
  CHECK(db.count("SELECT sum(remain) FROM stock") == stock_before);
  CHECK(db.count("SELECT consumed_cents FROM budget b JOIN activity a ON a.id = b.activity_id WHERE a.code = 'live_one'") == 300);
  // the settlement of each ended activity
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'activity.settle'") == 3);
  auto settle = db.open()->query("SELECT detail FROM audit WHERE action = 'activity.settle' AND entity_key = 'live_one'");
  REQUIRE(settle.size() == 1);
  auto d = json::parse(settle[0].str(0));
  CHECK(d["prizes"][0]["prize"] == "p1");
  CHECK(d["prizes"][0]["stock_total"] == 10);
  CHECK(d["prizes"][0]["stock_left"] == 7);
  CHECK(d["budget"]["authorised_cents"] == 100000);
  CHECK(d["budget"]["consumed_cents"] == 300);
  CHECK(d["budget"]["left_cents"] == 99700);
  CHECK(d["grants"]["success"]["count"] == 3);

  // twice = once
  const std::string after = snapshot(db);
  auto again = rt::last_json(db.ok({"expire", "-o", "json"}, 0, kLater));
  CHECK(again["counts"]["activities_ended"] == 0);
  CHECK(again["counts"]["qualifications_expired"] == 0);
  CHECK(again["counts"]["grants_expired"] == 0);
  CHECK(snapshot(db) == after);
  // a claim on an ended activity is refused as ended
  auto late = db.ok({"claim", "live_one", "--user", "u9", "--biz-id", "b9", "-o", "json"}, 1, kLater);
  CHECK(rt::last_json(late)["reason"] == "ended");
}

TEST_CASE("expire: two runs at once change each row exactly once (one works, the other exits 75 or finds nothing)") {
  TestDb db;
  db.migrate();
  world(db);
  rt::add_due_qualifications(db, "running", 400, kDue, "more");
  rt::Run a, b;
  std::thread t1([&] { a = db.rc({"expire", "-o", "json", "--chunk-size", "3"}, kLater); });
  std::thread t2([&] { b = db.rc({"expire", "-o", "json", "--chunk-size", "3"}, kLater); });
  t1.join();
  t2.join();
  INFO(a.all() << "\n" << b.all());
  CHECK((a.rc == 0 || a.rc == 75));
  CHECK((b.rc == 0 || b.rc == 75));
  int64_t ended = 0, expired = 0;
  for (auto* r : {&a, &b})
    if (r->rc == 0) {
      auto j = rt::last_json(*r);
      ended += j["counts"]["activities_ended"].get<int64_t>();
      expired += j["counts"]["qualifications_expired"].get<int64_t>();
    } else {
      // (the holder is named once it has recorded its run in job_lock; a moment before, it is
      // "another process (not yet recorded in job_lock)")
      CHECK(r->err.find("cannot start: the lease 'expire' is held by ") != std::string::npos);
    }
  CHECK(ended == 3);
  CHECK(expired == 425);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'qualification' AND to_state = 'expired'") == 425);
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'activity.settle'") == 3);
}

TEST_CASE("expire: the window's end second is inside it - an activity ending 23:59:59 ends from 00:00:00.000 on") {
  TestDb db;
  db.migrate();
  const int64_t end = 1893455999000;  // 2029-12-31T23:59:59Z
  rt::make_activity(db, "edge", "live", end);
  // during the end second the activity still serves claims, so expire leaves it alone
  auto in = rt::last_json(db.ok({"expire", "-o", "json"}, 0, {{"REWARDCTL_NOW", "2029-12-31T23:59:59.900Z"}}));
  CHECK(in["counts"]["activities_ended"] == 0);
  CHECK(db.count("SELECT count(*) FROM activity WHERE code = 'edge' AND state = 'live'") == 1);
  auto out = rt::last_json(db.ok({"expire", "-o", "json"}, 0, {{"REWARDCTL_NOW", "2030-01-01T00:00:00Z"}}));
  CHECK(out["counts"]["activities_ended"] == 1);
  CHECK(db.count("SELECT count(*) FROM activity WHERE code = 'edge' AND state = 'ended'") == 1);
}
