// list-issue and the fuse: an item whose claim a fuse holds is recorded `held` (its pending grant's
// record code on it), the run goes on with the other items, and the fuse's decision moves each held
// item in the transaction that moves its grant: release -> issued (or rejected with the reason when
// the world changed), also when two releases run at once; confirm -> cancelled; a cancelled batch
// cancels its held items and their grants; SIGKILL during a held run and during a release. The
// oracle (reconcile, with its list_items check) runs at the end of every test.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "support/jobs.hpp"
#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

std::string users_csv(int from, int to) {
  std::string s = "user_id\n";
  for (int i = from; i < to; ++i) s += "u" + std::to_string(i) + "\n";
  return s;
}

// A live activity with `stock` units of p1 and p2, and an approved batch of users u0..u<users-1> for p1.
std::string approved_batch(TestDb& db, int64_t stock, int users) {
  db.migrate();
  Spec s;
  s.stock = stock;
  s.budget = 1'000'000;
  s.extra = "[[prizes]]\ncode = \"p2\"\nitem = \"thing\"\namount = 1\nstock = 100\n";
  seed(db, s);
  write_file(db.dir(), "l.csv", users_csv(0, users));
  auto p = last_json(db.ok({"list-issue", "plan", "act", db.dir() + "/l.csv", "--prize", "p1", "-o", "json",
                            "--operator", "alice", "--allow-partial"}));
  std::string b = p["batch"];
  db.ok({"list-issue", "approve", b, "--operator", "bob"});
  return b;
}

std::string block_p1(const TestDb& db) {
  return json::parse(db.ok({"fuse", "block", "act", "--prize", "p1", "--reason", "wrong amount", "-o", "json"}).out)["event"];
}

int64_t items_in(const TestDb& db, const std::string& state) {
  return db.count("SELECT count(*) FROM list_item WHERE state = $1", {state});
}

int64_t moved_from_held(const TestDb& db, const std::string& to) {
  return db.count("SELECT count(*) FROM status_log WHERE entity = 'list_item' AND from_state = 'held' AND to_state = $1",
                  {to});
}

}  // namespace

TEST_CASE("list-issue held: a run on a blocked prize records its items held and goes on - items --state held lists them") {
  TestDb db;
  auto b = approved_batch(db, 100, 12);
  std::string ev = block_p1(db);
  // the dry run counts them held and keeps nothing
  auto dry = last_json(db.ok({"list-issue", "run", b, "--dry-run", "-o", "json"}, 3));
  CHECK(dry["held"] == 12);
  CHECK(items_in(db, "pending") == 12);
  CHECK(db.count("SELECT count(*) FROM grants") == 0);

  auto r = db.ok({"list-issue", "run", b, "--chunk", "5", "-o", "json"}, 3);  // partial: not everything issued
  auto j = last_json(r);
  CHECK(j["held"] == 12);
  CHECK(j["issued"] == 0);
  CHECK(j["pending"] == 0);
  CHECK(r.err.find("held by a fuse") != std::string::npos);
  CHECK(items_in(db, "held") == 12);
  // each held item carries its pending grant's record code; the grant names the event
  CHECK(db.count("SELECT count(*) FROM list_item li JOIN grants g ON g.record_code = li.record_code AND "
                 "g.list_item_id = li.id JOIN fuse_event e ON e.id = g.fuse_event_id WHERE li.state = 'held' AND "
                 "g.state = 'pending' AND g.reason = 'held_by_fuse' AND e.batch_no = $1",
                 {ev}) == 12);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'list_item' AND from_state = 'pending' AND "
                 "to_state = 'held'") == 12);
  // nothing taken while held
  CHECK(db.count("SELECT sum(remain) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.code = 'p1'") == 100);
  auto st = last_json(db.ok({"list-issue", "status", b, "-o", "json"}));
  CHECK(st["held"] == 12);
  CHECK(st["pending"] == 0);
  auto held = lines(db.ok({"list-issue", "items", b, "--state", "held", "-o", "json"}).out);
  REQUIRE(held.size() == 12);
  CHECK(json::parse(held[0])["reason"] == "held_by_fuse");
  CHECK_FALSE(json::parse(held[0])["record_code"].is_null());
  CHECK(db.ok({"list-issue", "items", b, "--state", "held"}).out.find("held_by_fuse") != std::string::npos);
  // a rerun has nothing pending and takes nothing twice; the batch waits for the fuse's decision
  CHECK(last_json(db.ok({"list-issue", "run", b, "-o", "json"}))["state"] == "running");
  CHECK(db.count("SELECT count(*) FROM grants") == 12);
  db.ok({"reconcile"});
}

TEST_CASE("list-issue held: release issues each held item once, also with two releases at once - sold out is rejected") {
  TestDb db;
  const int n = 20;
  auto b = approved_batch(db, 14, n);  // 14 units for 20 users: 6 are sold out at the release
  std::string ev = block_p1(db);
  db.ok({"list-issue", "run", b, "--chunk", "7"}, 3);
  REQUIRE(items_in(db, "held") == n);
  SUBCASE("one release") { db.ok({"fuse", "release", ev, "--false-alarm"}); }
  SUBCASE("two releases at once") {
    Run r1, r2;
    std::thread t1([&] { r1 = db.rc({"fuse", "release", ev, "--false-alarm"}); });
    std::thread t2([&] { r2 = db.rc({"fuse", "release", ev, "--false-alarm"}); });
    t1.join();
    t2.join();
    INFO(r1.all() << r2.all());
    CHECK(r1.rc == 0);
    CHECK(r2.rc == 0);
  }
  CHECK(items_in(db, "held") == 0);
  CHECK(items_in(db, "issued") == 14);
  CHECK(items_in(db, "rejected") == n - 14);
  CHECK(db.count("SELECT count(*) FROM list_item WHERE state = 'rejected' AND reason = 'sold_out'") == n - 14);
  // exactly once: one log row per item out of held, one grant per user, one credit per issued item
  CHECK(moved_from_held(db, "issued") == 14);
  CHECK(moved_from_held(db, "rejected") == n - 14);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'list_item' AND from_state = 'held'") == n);
  CHECK(db.count("SELECT count(*) FROM grants") == n);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 14);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 14);
  CHECK(db.count("SELECT count(*) FROM list_item li JOIN grants g ON g.record_code = li.record_code WHERE "
                 "li.state = 'issued' AND g.state = 'success'") == 14);
  auto st = last_json(db.ok({"list-issue", "status", b, "-o", "json"}));
  CHECK(st["issued"] == 14);
  CHECK(st["held"] == 0);
  CHECK(st["state"] == "running");  // held items kept it open; a run now closes it
  CHECK(last_json(db.ok({"list-issue", "run", b, "-o", "json"}))["state"] == "done");
  db.ok({"reconcile"});
  // a second release changes nothing
  db.ok({"fuse", "release", ev, "--false-alarm"});
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'list_item' AND from_state = 'held'") == n);
}

TEST_CASE("list-issue held: confirm cancels the held items with their grants - the unblocked prize issues meanwhile") {
  TestDb db;
  auto b = approved_batch(db, 100, 10);
  std::string ev = block_p1(db);
  db.ok({"list-issue", "run", b}, 3);
  REQUIRE(items_in(db, "held") == 10);
  // another prize of the activity is not blocked: claims on it are granted
  CHECK(last_json(db.ok({"claim", "act", "--user", "x1", "--biz-id", "x1", "--prize", "p2", "-o", "json"}))["outcome"] ==
        "granted");
  db.ok({"fuse", "confirm", ev, "--reason", "fraud", "-o", "json"});
  CHECK(items_in(db, "held") == 0);
  CHECK(items_in(db, "cancelled") == 10);
  CHECK(moved_from_held(db, "cancelled") == 10);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'cancelled'") == 10);
  CHECK(db.count("SELECT count(*) FROM list_item li JOIN grants g ON g.record_code = li.record_code WHERE "
                 "li.state = 'cancelled' AND g.state = 'cancelled'") == 10);
  // confirmed twice: nothing moves again
  db.ok({"fuse", "confirm", ev, "--reason", "fraud"});
  CHECK(moved_from_held(db, "cancelled") == 10);
  db.ok({"reconcile"});
}

TEST_CASE("list-issue held: cancelling the batch cancels its held items and their held grants") {
  TestDb db;
  auto b = approved_batch(db, 100, 8);
  std::string ev = block_p1(db);
  db.ok({"list-issue", "run", b}, 3);
  REQUIRE(items_in(db, "held") == 8);
  auto dry = last_json(db.ok({"list-issue", "cancel", b, "--reason", "wrong list", "--yes", "--dry-run", "-o", "json"}));
  CHECK(dry["items_cancelled"] == 8);
  CHECK(items_in(db, "held") == 8);
  db.ok({"list-issue", "cancel", b, "--reason", "wrong list", "--yes"});
  CHECK(items_in(db, "cancelled") == 8);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'cancelled' AND reason = 'list_batch_cancelled'") == 8);
  // the fuse's release later finds nothing of this batch to move
  db.ok({"fuse", "release", ev, "--false-alarm"});
  CHECK(items_in(db, "cancelled") == 8);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 0);
  db.ok({"reconcile"});
}

TEST_CASE("reconcile: a list item that disagrees with its grant is found by list_items with its key") {
  TestDb db;
  db.expect_damage();
  auto b = approved_batch(db, 100, 4);
  std::string ev = block_p1(db);
  db.ok({"list-issue", "run", b}, 3);
  db.ok({"fuse", "release", ev, "--false-alarm"});
  db.open()->exec("UPDATE list_item SET state = 'held' WHERE user_id = 'u2'");
  auto r = db.ok({"reconcile", "--checks", "list_items", "-o", "json"}, 1);
  std::vector<json> diffs;
  for (auto& l : lines(r.out))
    if (auto j = json::parse(l); j["type"] == "diff") diffs.push_back(j);
  REQUIRE(diffs.size() == 1);
  auto d = diffs[0];
  CHECK(d["check"] == "list_items");
  CHECK(d["entity"] == "list_item");
  CHECK(d["key"] == b + "/u2");
  CHECK(d["actual"].get<std::string>().find("success") != std::string::npos);
}

TEST_CASE("list-issue held: a held batch run killed with SIGKILL and rerun holds each item once") {
  TestDb db;
  const int n = 600;
  auto b = approved_batch(db, 1000, n);
  block_p1(db);
  pid_t pid = spawn(db, {"list-issue", "run", b, "--chunk", "20", "--progress", "none"});
  bool some = wait_for(db, "SELECT count(*) FROM list_item WHERE state = 'held'", 40);
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  REQUIRE(some);
  // whatever the kill caught: every held item has its held grant, no grant without its item
  CHECK(db.count("SELECT count(*) FROM grants") == items_in(db, "held"));
  db.ok({"list-issue", "run", b, "--chunk", "50"}, 3);
  CHECK(items_in(db, "held") == n);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'pending'") == n);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'list_item' AND to_state = 'held'") == n);
}

TEST_CASE("list-issue held: a release killed with SIGKILL half-way is finished by the next, each item moved once") {
  TestDb db;
  const int n = 400;
  auto b = approved_batch(db, 1000, n);
  std::string ev = block_p1(db);
  db.ok({"list-issue", "run", b, "--chunk", "100"}, 3);
  REQUIRE(items_in(db, "held") == n);
  pid_t pid = spawn(db, {"fuse", "release", ev, "--false-alarm"});
  bool some = wait_for(db, "SELECT count(*) FROM list_item WHERE state = 'issued'", 5);
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  REQUIRE(some);
  // each item moved with its grant: as many issued items as grants out of pending
  CHECK(items_in(db, "issued") == db.count("SELECT count(*) FROM grants WHERE state <> 'pending'"));
  db.ok({"fuse", "release", ev, "--false-alarm"});
  CHECK(items_in(db, "issued") == n);
  CHECK(moved_from_held(db, "issued") == n);
  // a grant the kill caught between its commit and its delivery is delivered by resend
  db.ok({"resend", "--init-grace", "1ms"}, 0);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == n);
}
