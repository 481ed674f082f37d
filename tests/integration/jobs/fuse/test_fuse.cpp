// The fuse: fuse-scan trips on an injected spike for each rule kind and not on steady traffic or
// below the minimum volume (test clock); a trip blocks; no re-trip until released; decisions are
// idempotent, audited, have a dry-run twin, and two concurrent releases release once.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;
using rc::engine::Status;

namespace {

rc::Millis at(const char* s) { return *rc::parse_rfc3339(s); }
const rc::Millis T = at("2026-06-01T12:00:00Z");
const std::map<std::string, std::string> kNow{{"REWARDCTL_NOW", "2026-06-01T12:00:00Z"}};

struct Traffic {
  const TestDb& db;
  rc::FixedClock* clock = nullptr;
  EngineBox box;
  int n = 0;
  explicit Traffic(const TestDb& d) : db(d), box(engine(d, T)) { clock = static_cast<rc::FixedClock*>(box.clock.get()); }
  // `count` claims by new users at T + offset seconds (negative: before T).
  void claims(int count, int64_t offset_s, const std::string& activity = "act") {
    clock->set(T + offset_s * 1000);
    for (int i = 0; i < count; ++i, ++n) {
      auto o = claim(*box.engine, activity, "u" + std::to_string(n), "b" + std::to_string(n));
      REQUIRE(o.status == Status::granted);
    }
  }
};

std::string rule(const std::string& body, const std::string& prize = "p1") {
  return "[[fuse]]\nname = \"r\"\n" + (prize.empty() ? std::string() : "prize = \"" + prize + "\"\n") +
         "window_seconds = 600\n" + body;
}

json scan(const TestDb& db, int expect, const std::map<std::string, std::string>& env = kNow) {
  auto r = db.ok({"fuse-scan", "-o", "json"}, expect, env);
  json trip;
  for (auto& l : lines(r.out)) {
    auto j = json::parse(l);
    if (j["type"] == "trip") trip = j;
  }
  return trip;
}

}  // namespace

TEST_CASE("fuse: max_count trips on a spike, blocks the prize, does not re-trip until released") {
  TestDb db;
  db.migrate();
  Spec s;
  s.extra = rule("max_count = 5\n");
  seed(db, s);
  Traffic t(db);
  t.claims(3, -1200);  // the window before: not counted
  t.claims(5, -300);
  CHECK(scan(db, 0).is_null());  // 5 in the window: at the cap, not over it
  t.claims(1, -10);
  auto trip = scan(db, 1);
  REQUIRE_FALSE(trip.is_null());
  CHECK(trip["kind"] == "max_count");
  CHECK(trip["observed_count"] == 6);
  CHECK(trip["observed_amount"] == 600);
  CHECK(trip["threshold"] == 5);
  CHECK(trip["state"] == "tripped");
  CHECK(db.count("SELECT blocked FROM prize WHERE code = 'p1'") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'fuse_event' AND to_state = 'tripped'") == 1);
  // blocked: a claim is refused with held_by_fuse and takes nothing
  t.clock->set(T);
  CHECK(claim(*t.box.engine, "act", "late", "late-1").reason == rc::engine::Reason::held_by_fuse);
  CHECK(db.count("SELECT SUM(remain) FROM stock") == 91);
  // the rule does not trip again while its event is open
  CHECK(scan(db, 0).is_null());
  CHECK(db.count("SELECT count(*) FROM fuse_event") == 1);
  std::string ev = trip["event"];
  // released as a false alarm: unblocked (the held claim granted), and the rule watches again from
  // the release on: the spike judged a false alarm does not trip it again, a new one does
  db.ok({"fuse", "release", ev, "--false-alarm", "--reason", "campaign push"}, 0, kNow);
  CHECK(db.count("SELECT blocked FROM prize WHERE code = 'p1'") == 0);
  CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = 'late-1' AND state = 'success'") == 1);
  CHECK(claim(*t.box.engine, "act", "late", "late-2").status == Status::granted);
  CHECK(scan(db, 0).is_null());
  t.claims(6, 30);
  CHECK(scan(db, 1, {{"REWARDCTL_NOW", "2026-06-01T12:01:00Z"}})["observed_count"] == 8);  // 2 at the release + 6
  CHECK(db.count("SELECT count(*) FROM fuse_event") == 2);
}

TEST_CASE("fuse: max_amount trips on the cost issued in the window") {
  TestDb db;
  db.migrate();
  Spec s;
  s.extra = rule("max_amount_cents = 450\n", "");
  seed(db, s);
  Traffic t(db);
  t.claims(4, -100);
  CHECK(scan(db, 0).is_null());
  t.claims(1, -50);
  auto trip = scan(db, 1);
  CHECK(trip["kind"] == "max_amount");
  CHECK(trip["observed_amount"] == 500);
  CHECK(trip["prize"].is_null());
  // the whole activity is blocked by the open event
  t.clock->set(T);
  CHECK(claim(*t.box.engine, "act", "late", "late-1").reason == rc::engine::Reason::held_by_fuse);
}

TEST_CASE("fuse: period-over-period ignores volumes below min_count and steady traffic") {
  TestDb db;
  db.migrate();
  Spec s;
  s.extra = rule("pop_percent = 100\nmin_count = 4\n");
  seed(db, s);
  Traffic t(db);
  t.claims(2, -900);  // previous window
  t.claims(3, -300);  // +50%... and below the minimum volume anyway
  CHECK(scan(db, 0).is_null());
  t.claims(1, -200);  // 4 against 2: +100%, not more
  CHECK(scan(db, 0).is_null());
  t.claims(1, -100);  // 5 against 2: +150%
  auto trip = scan(db, 1);
  CHECK(trip["kind"] == "pop");
  CHECK(trip["observed_count"] == 5);
  CHECK(trip["compare_count"] == 2);
}

TEST_CASE("fuse: day-over-day compares with the same window a day earlier") {
  TestDb db;
  db.migrate();
  Spec s;
  s.extra = rule("dod_percent = 50\nmin_count = 3\n");
  seed(db, s);
  Traffic t(db);
  t.claims(4, -86400 - 300);  // yesterday, same window
  t.claims(6, -300);          // +50%: not more
  CHECK(scan(db, 0).is_null());
  t.claims(1, -60);  // 7 against 4: +75%
  // --dry-run of a scan reports the trip and writes nothing
  auto dry = db.ok({"fuse-scan", "--dry-run", "-o", "json"}, 1, kNow);
  CHECK(dry.out.find("\"kind\":\"dod\"") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM fuse_event") == 0);
  auto trip = scan(db, 1);
  CHECK(trip["kind"] == "dod");
  CHECK(trip["compare_count"] == 4);
  CHECK(db.count("SELECT count(*) FROM fuse_event") == 1);
}

TEST_CASE("fuse: block, confirm, unblock - audited, dry-run twins, idempotent") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  Traffic t(db);
  t.claims(1, -10);
  db.ok({"fuse", "block", "act", "--prize", "p1", "--reason", "ops saw a wrong amount", "--dry-run"}, 0, kNow);
  CHECK(db.count("SELECT count(*) FROM fuse_event") == 0);
  auto b = json::parse(db.ok({"fuse", "block", "act", "--prize", "p1", "--reason", "wrong amount", "-o", "json"}, 0, kNow).out);
  CHECK(b["changed"] == true);
  CHECK(b["kind"] == "manual");
  auto again = json::parse(db.ok({"fuse", "block", "act", "--prize", "p1", "--reason", "x", "-o", "json"}, 0, kNow).out);
  CHECK(again["changed"] == false);
  CHECK(db.count("SELECT blocked FROM prize") == 1);
  t.clock->set(T);
  CHECK(claim(*t.box.engine, "act", "x", "x1").reason == rc::engine::Reason::held_by_fuse);
  std::string ev = b["event"];
  db.ok({"fuse", "confirm", ev, "--reason", "real incident", "--dry-run"}, 0, kNow);
  CHECK(db.count("SELECT count(*) FROM fuse_event WHERE decision IS NULL") == 1);
  db.ok({"fuse", "confirm", ev, "--reason", "real incident"}, 0, kNow);
  auto c2 = json::parse(db.ok({"fuse", "confirm", ev, "--reason", "again", "-o", "json"}, 0, kNow).out);
  CHECK(c2["changed"] == false);
  CHECK(db.count("SELECT blocked FROM prize") == 1);  // confirmed: stays blocked
  auto shown_lines = lines(db.ok({"fuse", "show", ev, "-o", "json"}, 0, kNow).out);
  REQUIRE(shown_lines.size() == 2);  // the request it held (cancelled by the confirmation), then the event
  CHECK(json::parse(shown_lines[0])["state"] == "cancelled");
  auto shown = json::parse(shown_lines[1]);
  CHECK(shown["decision"] == "confirmed");
  db.ok({"fuse", "unblock", "act", "--prize", "p1", "--reason", "fixed", "--dry-run"}, 0, kNow);
  CHECK(db.count("SELECT blocked FROM prize") == 1);
  db.ok({"fuse", "unblock", "act", "--prize", "p1", "--reason", "fixed"}, 0, kNow);
  CHECK(db.count("SELECT blocked FROM prize") == 0);
  CHECK(claim(*t.box.engine, "act", "x", "x2").status == Status::granted);
  CHECK(db.count("SELECT count(*) FROM audit WHERE action IN ('fuse.block', 'fuse.confirm', 'fuse.unblock')") == 3);
  auto l = json::parse(lines(db.ok({"fuse", "list", "--state", "released", "-o", "json"}).out).at(0));
  CHECK(l["decision"] == "unblocked");
  db.ok({"fuse", "show", "nope"}, 67);  // not found, as everywhere
  db.ok({"fuse", "block", "nope", "--reason", "x"}, 67);
  db.ok({"fuse", "release", ev}, 64);  // --false-alarm is required
}

TEST_CASE("fuse: two concurrent releases of one event release it once") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  auto b = json::parse(db.ok({"fuse", "block", "act", "--reason", "x", "-o", "json"}).out);
  std::string ev = b["event"];
  Run r1, r2;
  std::thread a([&] { r1 = db.rc({"fuse", "release", ev, "--false-alarm", "-o", "json"}); });
  std::thread c([&] { r2 = db.rc({"fuse", "release", ev, "--false-alarm", "-o", "json"}); });
  a.join();
  c.join();
  CHECK(r1.rc == 0);
  CHECK(r2.rc == 0);
  CHECK(int(json::parse(r1.out)["changed"] == true) + int(json::parse(r2.out)["changed"] == true) == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'fuse_event' AND to_state = 'released'") == 1);
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'fuse.release'") == 1);
}

TEST_CASE("fuse-scan and reconcile run on the job runner: job_run, lease, --limit, metrics") {
  TestDb db;
  db.migrate();
  Spec s;
  s.extra = rule("max_count = 2\n");
  seed(db, s);
  Traffic t(db);
  t.claims(3, -60);
  // a dry run trips in a rolled-back chunk: reported, nothing written, no job_run row
  auto dry = db.ok({"fuse-scan", "--dry-run", "-o", "json"}, 1, kNow);
  CHECK(dry.out.find("\"kind\":\"max_count\"") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM fuse_event") + db.count("SELECT count(*) FROM job_run") == 0);
  const std::string prom = db.dir() + "/rewardctl.prom";
  auto r = db.ok({"fuse-scan", "--metrics-textfile", prom, "-o", "json"}, 1, kNow);
  auto job = json::parse(lines(r.out).at(0));
  CHECK(job["job"] == "fuse-scan");
  CHECK(job["counts"]["tripped"] == 1);
  CHECK(job["counts"]["rules"] == 1);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE job = 'fuse-scan' AND state = 'done' AND exit_code = 1") == 1);
  CHECK(read_file(prom).find("job=\"fuse-scan\"") != std::string::npos);
  // a second scan: the rule's event is open, nothing trips, exit 0
  auto again = json::parse(lines(db.ok({"fuse-scan", "-o", "json"}, 0, kNow).out).at(0));
  CHECK(again["counts"]["already_tripped"] == 1);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE job = 'fuse-scan' AND exit_code = 0") == 1);

  // reconcile on the runner: a job_run row; --limit 2 runs two checks and stores the run incomplete
  auto rec = db.ok({"reconcile", "--limit", "2", "-o", "json"}, 0, kNow);
  auto rl = lines(rec.out);
  auto run = json::parse(rl.back());
  CHECK(run["state"] == "incomplete");
  CHECK(run["skipped"].size() == 9);  // 11 checks, 2 run
  CHECK(db.count("SELECT count(*) FROM reconcile_run WHERE state = 'incomplete'") == 1);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE job = 'reconcile' AND stopped = 'limit'") == 1);
  db.ok({"reconcile", "-o", "json"}, 0, kNow);
  CHECK(db.count("SELECT count(*) FROM reconcile_run WHERE state = 'clean'") == 1);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE job = 'reconcile' AND state = 'done'") == 2);
}
