// Held requests: a claim on a prize or activity a fuse blocks becomes a pending grant that takes
// nothing and answers held (a retry returns the same grant); fuse release sends each through the
// claim flow again (granted, or rejected with the reason when the world changed), fuse confirm
// cancels them; each held grant is moved exactly once, also by two releases at once. The oracle
// (reconcile at the end of each test) proves stock, budget and limits count held grants as nothing.
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <thread>

#include "jobs/fuse/fuse.hpp"
#include "support/fault_store.hpp"
#include "support/jobs.hpp"
#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

json claim_cli(const TestDb& db, const std::string& user, const std::string& biz, int expect,
               const std::string& activity = "act") {
  auto r = db.ok({"claim", activity, "--user", user, "--biz-id", biz, "-o", "json"}, expect);
  return json::parse(lines(r.out).at(0));
}

std::string block(const TestDb& db, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"fuse", "block", "act", "--reason", "wrong amount", "-o", "json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return json::parse(db.ok(a).out)["event"];
}

int64_t remain(const TestDb& db) { return db.count("SELECT coalesce(sum(remain), 0) FROM stock"); }

}  // namespace

TEST_CASE("fuse held: a blocked prize holds the claim as a pending grant that takes nothing and a retry returns it") {
  TestDb db;
  db.migrate();
  Spec s;
  s.limit = 1;
  s.budget = 100000;
  seed(db, s);
  std::string ev = block(db, {"--prize", "p1"});
  auto h = claim_cli(db, "u1", "b1", 1);
  CHECK(h["outcome"] == "held");
  CHECK(h["reason"] == "held_by_fuse");
  CHECK(h["state"] == "pending");
  std::string code = h["record_code"];
  CHECK_FALSE(code.empty());
  auto again = claim_cli(db, "u1", "b1", 1);
  CHECK(again["outcome"] == "held");
  CHECK(again["record_code"] == code);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  CHECK(db.count("SELECT count(*) FROM grants g JOIN fuse_event e ON e.id = g.fuse_event_id "
                 "WHERE g.state = 'pending' AND g.reason = 'held_by_fuse' AND e.batch_no = $1",
                 {ev}) == 1);
  // nothing taken: stock, budget, limit counters
  CHECK(remain(db) == 100);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 0);
  CHECK(db.count("SELECT count(*) FROM limit_counter WHERE used > 0") == 0);
  // the same biz_id from another user is still a conflict
  CHECK(claim_cli(db, "u2", "b1", 1)["reason"] == "biz_id_conflict");
  // the dry run of a claim says held and writes nothing
  auto dry = json::parse(db.ok({"claim", "act", "--user", "u3", "--biz-id", "b3", "--dry-run", "-o", "json"}, 1).out);
  CHECK(dry["outcome"] == "held");
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  // fuse show lists it
  auto shown = lines(db.ok({"fuse", "show", ev, "-o", "json"}).out);
  REQUIRE(shown.size() == 2);
  CHECK(json::parse(shown[0])["record_code"] == code);
  CHECK(json::parse(shown[1])["held_requests"] == 1);

  // released as a false alarm: the held grant goes through the flow and is delivered
  auto dr = json::parse(db.ok({"fuse", "release", ev, "--false-alarm", "--dry-run", "-o", "json"}).out);
  CHECK(dr["held"]["pending"] == 1);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'pending'") == 1);
  auto rel = json::parse(db.ok({"fuse", "release", ev, "--false-alarm", "-o", "json"}).out);
  CHECK(rel["changed"] == true);
  CHECK(rel["held"]["granted"] == 1);
  CHECK(db.count("SELECT count(*) FROM grants WHERE record_code = $1 AND state = 'success' AND amount = 1 "
                 "AND cost_cents = 100",
                 {code}) == 1);
  CHECK(remain(db) == 99);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 100);
  CHECK(db.count("SELECT count(*) FROM status_log l JOIN grants g ON g.id = l.entity_id AND l.entity = 'grant' "
                 "WHERE g.record_code = $1",
                 {code}) == 3);  // -> pending -> init -> success (the ledger delivers in the release's commit, as for a claim)
  // the retry now replays the granted grant; a second release does nothing
  auto replay = claim_cli(db, "u1", "b1", 0);
  CHECK(replay["outcome"] == "replayed");
  CHECK(replay["record_code"] == code);
  auto rel2 = json::parse(db.ok({"fuse", "release", ev, "--false-alarm", "-o", "json"}).out);
  CHECK(rel2["changed"] == false);
  CHECK(remain(db) == 99);
}

TEST_CASE("fuse held: released into a changed world - sold out and over the limit are rejected with their reason") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 2;
  s.limit = 1;
  seed(db, s);
  std::string ev = block(db);  // the whole activity
  claim_cli(db, "u1", "b1", 1);
  claim_cli(db, "u1", "b2", 1);  // the same user again: one of the two is over the limit
  claim_cli(db, "u2", "b3", 1);
  claim_cli(db, "u3", "b4", 1);  // the stock has only 2
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'pending'") == 4);
  auto rel = json::parse(db.ok({"fuse", "release", ev, "--false-alarm", "-o", "json"}).out);
  CHECK(rel["held"]["granted"] == 2);
  CHECK(rel["held"]["rejected"] == 2);
  CHECK(rel["held"]["rejected_reasons"]["limit_reached"] == 1);
  CHECK(rel["held"]["rejected_reasons"]["sold_out"] == 1);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 2);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'invalid' AND reason = 'limit_reached' AND biz_id = 'b2'") == 1);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'invalid' AND reason = 'sold_out' AND biz_id = 'b4'") == 1);
  CHECK(remain(db) == 0);
  // a retry of a rejected one answers with the grant as it is now, and takes nothing
  CHECK(claim_cli(db, "u3", "b4", 0)["state"] == "invalid");
}

TEST_CASE("fuse held: confirm cancels the held requests once and bad input is refused with nothing written") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  std::string ev = block(db);
  claim_cli(db, "u1", "b1", 1);
  claim_cli(db, "u2", "b2", 1);
  auto changes = [&] {
    return db.count("SELECT count(*) FROM status_log") + db.count("SELECT count(*) FROM audit") +
           db.count("SELECT count(*) FROM grants WHERE state = 'pending'");
  };
  const int64_t before = changes();
  db.ok({"fuse", "release", "F-nope", "--false-alarm"}, 67);
  db.ok({"fuse", "confirm", "F-nope", "--reason", "x"}, 67);
  db.ok({"fuse", "confirm", ev}, 64);           // --reason is required
  db.ok({"fuse", "release", ev}, 64);           // --false-alarm is required
  db.ok({"fuse", "block", "act", "--prize", "nope", "--reason", "x"}, 67);
  db.ok({"fuse", "confirm", ev, "--reason", "bad \xff\xfe bytes"}, 64);  // not UTF-8: PostgreSQL would refuse it
  db.ok({"fuse", "confirm", ev, "--reason", std::string(3000, 'a')}, 64);
  db.ok({"fuse", "confirm", ev, "--reason", ""}, 64);
  db.ok({"fuse", "release", "", "--false-alarm"}, 64);
  db.ok({"fuse", "block", "", "--reason", "x"}, 64);
  auto dry = json::parse(db.ok({"fuse", "confirm", ev, "--reason", "fraud", "--dry-run", "-o", "json"}).out);
  CHECK(dry["held"]["pending"] == 2);
  CHECK(changes() == before);

  auto c = json::parse(db.ok({"fuse", "confirm", ev, "--reason", "fraud", "-o", "json"}).out);
  CHECK(c["held"]["cancelled"] == 2);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'cancelled' AND reason LIKE '%fraud%'") == 2);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND from_state = 'pending' "
                 "AND to_state = 'cancelled'") == 2);
  // still blocked: a new claim is held again, and confirm again cancels only that one
  claim_cli(db, "u3", "b3", 1);
  auto c2 = json::parse(db.ok({"fuse", "confirm", ev, "--reason", "fraud", "-o", "json"}).out);
  CHECK(c2["held"]["cancelled"] == 1);
  auto c3 = json::parse(db.ok({"fuse", "confirm", ev, "--reason", "fraud", "-o", "json"}).out);
  CHECK(c3["changed"] == false);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND to_state = 'cancelled'") == 3);
  // a confirmed event is not a false alarm
  const int64_t mid = changes();
  auto r = db.ok({"fuse", "release", ev, "--false-alarm"}, 65);
  CHECK(r.err.find("confirmed") != std::string::npos);
  CHECK(changes() == mid);
  CHECK(remain(db) == 100);
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'fuse.confirm'") == 1);
  // unblock lifts it; a cancelled request stays cancelled, its retry says so
  db.ok({"fuse", "unblock", "act", "--reason", "fixed"});
  CHECK(claim_cli(db, "u1", "b1", 0)["state"] == "cancelled");
  CHECK(claim_cli(db, "u4", "b4", 0)["outcome"] == "granted");
  // a released event cannot be confirmed
  db.ok({"fuse", "confirm", ev, "--reason", "late"}, 65);
}

TEST_CASE("fuse held: two releases at once move each held grant exactly once") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 15;
  s.budget = 100000;
  seed(db, s);
  std::string ev = block(db, {"--prize", "p1"});
  const int n = 24;
  for (int i = 0; i < n; ++i) claim_cli(db, "u" + std::to_string(i), "b" + std::to_string(i), 1);
  REQUIRE(db.count("SELECT count(*) FROM grants WHERE state = 'pending'") == n);
  Run r1, r2;
  std::thread a([&] { r1 = db.rc({"fuse", "release", ev, "--false-alarm", "-o", "json"}); });
  std::thread b([&] { r2 = db.rc({"fuse", "release", ev, "--false-alarm", "-o", "json"}); });
  a.join();
  b.join();
  INFO(r1.all() << r2.all());
  REQUIRE(r1.rc == 0);
  REQUIRE(r2.rc == 0);
  auto j1 = json::parse(r1.out), j2 = json::parse(r2.out);
  CHECK(j1["held"]["granted"].get<int>() + j2["held"]["granted"].get<int>() == 15);
  CHECK(j1["held"]["rejected"].get<int>() + j2["held"]["rejected"].get<int>() == n - 15);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 15);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'invalid' AND reason = 'sold_out'") == n - 15);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND from_state = 'pending'") == n);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'fuse_event' AND to_state = 'released'") == 1);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 15);
  CHECK(remain(db) == 0);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 1500);
}

TEST_CASE("fuse held: a release and a confirm at once - one decision wins and every held request follows it") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 50;
  seed(db, s);
  std::string ev = block(db);
  const int n = 12;
  for (int i = 0; i < n; ++i) claim_cli(db, "u" + std::to_string(i), "b" + std::to_string(i), 1);
  Run r1, r2;
  std::thread a([&] { r1 = db.rc({"fuse", "release", ev, "--false-alarm", "-o", "json"}); });
  std::thread b([&] { r2 = db.rc({"fuse", "confirm", ev, "--reason", "fraud", "-o", "json"}); });
  a.join();
  b.join();
  INFO(r1.all() << r2.all());
  const bool released = db.count("SELECT count(*) FROM fuse_event WHERE state = 'released'") == 1;
  if (released) {
    CHECK(r1.rc == 0);
    CHECK(r2.rc == 65);  // too late: nothing left to confirm
    CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == n);
  } else {
    CHECK(r2.rc == 0);
    CHECK(r1.rc == 65);  // confirmed first: not a false alarm
    CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'cancelled'") == n);
  }
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND from_state = 'pending'") == n);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'pending'") == 0);
}

TEST_CASE("fuse held: a release killed with SIGKILL half-way is finished by the next release, each request moved once") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 1000;
  seed(db, s);
  std::string ev = block(db, {"--prize", "p1"});
  const int n = 300;
  {
    auto box = engine(db);
    for (int i = 0; i < n; ++i)
      REQUIRE(claim(*box.engine, "act", "u" + std::to_string(i), "b" + std::to_string(i)).status ==
              rc::engine::Status::held);
  }
  pid_t pid = spawn(db, {"fuse", "release", ev, "--false-alarm"});
  bool some = wait_for(db, "SELECT count(*) FROM grants WHERE state = 'success'", 10);
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  REQUIRE(some);
  const int64_t done_before = db.count("SELECT count(*) FROM grants WHERE state <> 'pending'");
  INFO("moved before the kill: " << done_before);
  CHECK(db.count("SELECT count(*) FROM fuse_event WHERE state = 'released'") == 1);
  // the event is released: the next release finishes what it still holds
  auto j = json::parse(db.ok({"fuse", "release", ev, "--false-alarm", "-o", "json"}).out);
  CHECK(j["held"]["granted"].get<int64_t>() + done_before >= n);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'pending'") == 0);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND from_state = 'pending'") == n);
  // a grant the kill caught between its commit and its delivery is left in init for resend
  db.ok({"resend", "--init-grace", "1ms"}, 0);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == n);
  CHECK(remain(db) == 1000 - n);
}

TEST_CASE("fuse held: claims arriving while a release runs are held and then released, or granted, never lost or doubled") {
  // A claim that meets the event while a release decides it: the hold locks the event FOR SHARE
  // (PostgreSQL), so the release's decision waits for it and its pass over the held requests finds
  // it; a claim after the decision sees the event released and is granted directly. Claims loop
  // in two threads (own connections) before, during and after a release in another process.
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 20000;
  seed(db, s);
  std::string ev = block(db, {"--prize", "p1"});
  const int n = 150;  // held before the release starts: it has work to do while the claims go on
  {
    auto box = engine(db);
    for (int i = 0; i < n; ++i)
      REQUIRE(claim(*box.engine, "act", "h" + std::to_string(i), "hb" + std::to_string(i)).status ==
              rc::engine::Status::held);
  }
  std::atomic<bool> release_done{false}, stop{false};
  std::atomic<int> held{0}, granted{0}, other{0}, after_release{0};
  std::mutex mu;
  std::vector<std::string> others;
  auto loop = [&](int t) {
    auto box = engine(db);
    for (int i = 0; !stop && i < 5000; ++i) {
      const std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
      auto o = claim(*box.engine, "act", "u" + id, "c" + id);
      if (o.status == rc::engine::Status::held) ++held;
      else if (o.status == rc::engine::Status::granted) ++granted;
      else {
        ++other;
        std::lock_guard<std::mutex> l(mu);
        others.push_back(id + ": " + rc::engine::status_name(o.status) + " " + rc::name(o.reason));
      }
      if (release_done && ++after_release >= 20) stop = true;
    }
  };
  std::thread c1(loop, 1), c2(loop, 2);
  REQUIRE(eventually([&] { return held >= 10; }, 60));
  pid_t pid = spawn(db, {"fuse", "release", ev, "--false-alarm"});
  int st = 0;
  waitpid(pid, &st, 0);
  release_done = true;
  c1.join();
  c2.join();
  INFO("held " << held << ", granted " << granted << ", other " << other << (others.empty() ? "" : ": " + others[0]));
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  CHECK(other == 0);
  CHECK(held >= 10);
  CHECK(granted >= 20);
  const int64_t claims = held + granted;
  // nothing left held, nothing lost: every request has one grant, delivered
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'pending'") == 0);
  CHECK(db.count("SELECT count(*) FROM grants") == n + claims);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == n + claims);
  // each held request was held once and moved out of pending once; the others were never held
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND to_state = 'pending'") == n + held);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND from_state = 'pending'") == n + held);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == n + claims);
  CHECK(remain(db) == 20000 - n - claims);
}

// A lottery request held by a fuse keeps the draw it made; its release grants what it drew. Drawing
// again on release would give every held request a second chance at the prizes nobody blocked.
TEST_CASE("fuse held: a held lottery request keeps its draw, and its release grants what it drew") {
  TestDb db;
  db.migrate();
  Spec s;
  s.kind = "lottery";
  s.custom_prizes = true;
  s.budget = 1'000'000;
  // gold [0, 1), silver [1, 4), thanks [4, 10), thanks the consolation prize
  s.extra = "[items.gold]\nkind = \"coupon\"\nunit_cost_cents = 500\nchannel = \"ledger\"\n"
            "[[prizes]]\ncode = \"gold\"\nitem = \"gold\"\namount = 1\nstock = 10\nweight = 1\n"
            "[[prizes]]\ncode = \"silver\"\nitem = \"thing\"\namount = 3\nstock = 100\nweight = 3\n"
            "[[prizes]]\ncode = \"thanks\"\nitem = \"thing\"\namount = 1\nstock = 100\nweight = 6\n"
            "[lottery]\nconsolation = \"thanks\"\n";
  seed(db, s);
  block(db, {"--prize", "gold"});
  block(db, {"--prize", "thanks"});
  rc::engine::EngineOptions o;
  o.draw_below = [](int64_t total) {
    CHECK(total == 10);
    return int64_t(0);  // every draw here is gold
  };
  auto e = engine(db, std::nullopt, o);
  for (int i = 0; i < 5; ++i) {
    auto h = claim(*e.engine, "act", "u" + std::to_string(i), "b" + std::to_string(i));
    CHECK(h.status == rc::engine::Status::held);
  }
  // and a chunk of claim_many (list-issue's path) holds the same way, keeping each draw
  std::vector<rc::engine::ClaimRequest> rs(3);
  for (size_t i = 0; i < rs.size(); ++i) {
    rs[i].activity = "act";
    rs[i].user = "m" + std::to_string(i);
    rs[i].biz_id = "m" + std::to_string(i);
  }
  std::vector<rc::engine::ClaimOutcome> outs;
  e.store->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) { outs = e.engine->claim_many(tx, rs); });
  for (auto& h : outs) CHECK(h.status == rc::engine::Status::held);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'pending' AND draw_value = 0 AND pool_version = 1") == 8);
  // the releases run in the CLI's own processes, with the secure-seeded generator: a new draw would
  // be gold only one time in ten
  db.ok({"fuse", "unblock", "act", "--prize", "gold", "--reason", "fixed"});
  db.ok({"fuse", "unblock", "act", "--prize", "thanks", "--reason", "fixed"});
  CHECK(db.count("SELECT count(*) FROM grants g JOIN prize p ON p.id = g.prize_id WHERE p.code = 'gold' AND "
                 "g.state = 'success' AND g.draw_value = 0 AND g.degraded_from IS NULL") == 8);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state <> 'success'") == 0);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 8 * 500);
}

// Only a draw the claim made is kept on the held grant: none when the whole activity is blocked
// (the hold comes before selection), none for a red packet (its amount is drawn after selection),
// on both backends alike (on PostgreSQL the one statement drew first and was refused).
TEST_CASE("fuse held: a request held before any draw, or a held red packet, keeps no draw") {
  TestDb db;
  db.migrate();
  Spec lot;
  lot.kind = "lottery";
  lot.code = "lot";
  lot.custom_prizes = true;
  lot.budget = 1'000'000;
  lot.extra = "[[prizes]]\ncode = \"gold\"\nitem = \"thing\"\namount = 1\nstock = 10\nweight = 1\n"
              "[[prizes]]\ncode = \"thanks\"\nitem = \"thing\"\namount = 1\nstock = 100\nweight = 9\n"
              "[lottery]\nconsolation = \"thanks\"\n";
  seed(db, lot);
  Spec rp = redpack(100'000);
  rp.code = "rp";
  seed(db, rp);
  db.ok({"fuse", "block", "lot", "--reason", "whole activity"});
  db.ok({"fuse", "block", "rp", "--reason", "whole activity"});
  auto e = engine(db);
  for (int i = 0; i < 3; ++i) {
    CHECK(claim(*e.engine, "lot", "u" + std::to_string(i), "l" + std::to_string(i)).status ==
          rc::engine::Status::held);
    CHECK(claim(*e.engine, "rp", "u" + std::to_string(i), "r" + std::to_string(i)).status ==
          rc::engine::Status::held);
  }
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'pending'") == 6);
  CHECK(db.count("SELECT count(*) FROM grants WHERE draw_value IS NOT NULL OR pool_version IS NOT NULL") == 0);
  db.ok({"fuse", "unblock", "lot", "--reason", "fixed"});
  db.ok({"fuse", "unblock", "rp", "--reason", "fixed"});
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 6);
  CHECK(db.count("SELECT count(*) FROM grants g JOIN activity a ON a.id = g.activity_id WHERE a.code = 'lot' AND "
                 "g.draw_value IS NULL") == 0);
  CHECK(db.count("SELECT count(*) FROM grants g JOIN activity a ON a.id = g.activity_id WHERE a.code = 'rp' AND "
                 "(g.amount < 100 OR g.amount > 300 OR g.draw_value IS NOT NULL)") == 0);
}

// A chunk of claim_many (list-issue's path) whose request a fuse stops looks for the event to hold
// it under. When the event was released in between, the request runs the flow once more; when a
// fuse stops that run too, the request is held under the new event, as claim() holds after its one
// retry, never answered held_by_fuse without a held grant. The fuse moves from another process
// between two statements of the chunk's transaction (the FaultStore's hook), which PostgreSQL's
// read committed allows and SQLite's one writer does not.
TEST_CASE("fuse held: a chunk request stopped again after a release in between is held under the new event") {
  if (!is_pg()) {
    MESSAGE("PostgreSQL only: SQLite's one writer lets no fuse move inside a chunk's transaction");
    return;
  }
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  block(db);
  auto f = faulty(db, 0);
  int phase = 0;
  std::string second;
  f.fs->before_each = [&](const std::string& sql) {
    if (phase == 0 && sql == "SELECT id FROM activity WHERE code = $1") {
      db.ok({"fuse", "unblock", "act", "--reason", "false alarm"});  // before the hold looks for its event
      phase = 1;
    } else if (phase == 1 && sql.find("FROM fuse_event WHERE activity_id") != std::string::npos) {
      phase = 2;  // the hold found nothing: the next statement starts the flow again
    } else if (phase == 2) {
      second = block(db);
      phase = 3;
    }
  };
  rc::engine::ClaimRequest r;
  r.activity = "act";
  r.user = "u1";
  r.biz_id = "b1";
  std::vector<rc::engine::ClaimOutcome> outs;
  f.box.store->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) { outs = f.box.engine->claim_many(tx, {r}); });
  f.fs->before_each = nullptr;
  CHECK(phase == 3);
  REQUIRE(outs.size() == 1);
  CHECK(outs[0].status == rc::engine::Status::held);
  CHECK(outs[0].reason == rc::engine::Reason::held_by_fuse);
  CHECK(db.count("SELECT count(*) FROM grants g JOIN fuse_event e ON e.id = g.fuse_event_id WHERE g.state = 'pending' "
                 "AND g.reason = 'held_by_fuse' AND e.batch_no = $1",
                 {second}) == 1);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
  // and the second event's release grants it, once
  db.ok({"fuse", "unblock", "act", "--reason", "fixed"});
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'success' AND biz_id = 'b1'") == 1);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
}

// A release sends each held request through the flow again. When another fuse stops that flow and
// is released before the release's follow-up looks for it, nothing blocks the request any more:
// it goes through the flow once more and is granted, never rejected as held_by_fuse (found by a
// hostile review: under block/unblock loops 3 of 6000 list-issue users lost their grant this way).
// PostgreSQL only, as the case above: the second fuse moves between two statements of the release.
TEST_CASE("fuse held: a release whose flow a second fuse stops, released in between, grants the request") {
  if (!is_pg()) {
    MESSAGE("PostgreSQL only: SQLite's one writer lets no fuse move inside a release's transactions");
    return;
  }
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  const std::string first = block(db);  // the whole activity
  auto h = claim_cli(db, "u1", "b1", 1);
  REQUIRE(h["outcome"] == "held");
  const std::string second = block(db, {"--prize", "p1"});
  auto f = faulty(db, 0);
  bool moved = false;
  f.fs->before_each = [&](const std::string& sql) {
    // the follow-up's look for the event that stopped the flow: the second fuse is released just before
    if (!moved && sql.find("FROM fuse_event WHERE activity_id") != std::string::npos) {
      db.ok({"fuse", "release", second, "--false-alarm", "--reason", "false alarm too"});
      moved = true;
    }
  };
  auto d = rc::jobs::fuse::release(*f.box.engine, first, "false alarm", "test", rc::SystemClock().now_ms(), false);
  f.fs->before_each = nullptr;
  CHECK(moved);
  CHECK(d.held.granted == 1);
  CHECK(d.held.rejected == 0);
  CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = 'b1' AND state = 'success'") == 1);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
}

// A claim that named no prize is stopped, on its release, by the fuse of the prize its selection
// chose: it is held by that prize's open event (not left on the event just released, which no
// later unblock would look at), and that event's unblock grants it.
TEST_CASE("fuse held: a request that named no prize, released while its prize's fuse is open, follows that fuse") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  const std::string activity_event = block(db);
  auto h = claim_cli(db, "u1", "b1", 1);
  REQUIRE(h["outcome"] == "held");
  const std::string prize_event = block(db, {"--prize", "p1"});
  auto r = db.ok({"fuse", "release", activity_event, "--false-alarm", "--reason", "false alarm", "-o", "json"});
  INFO(r.out << r.err);
  CHECK(db.count("SELECT count(*) FROM grants g JOIN fuse_event e ON e.id = g.fuse_event_id WHERE g.biz_id = 'b1' "
                 "AND g.state = 'pending' AND e.batch_no = $1",
                 {prize_event}) == 1);
  auto show = db.ok({"fuse", "show", prize_event});
  CHECK(show.out.find(h["record_code"].get<std::string>()) != std::string::npos);
  auto u = json::parse(lines(db.ok({"fuse", "unblock", "act", "--prize", "p1", "--reason", "fixed", "-o", "json"}).out).back());
  CHECK(u["event"] == prize_event);  // the event as the unblock left it
  CHECK(u["state"] == "released");
  CHECK(u["decision"] == "unblocked");
  CHECK(u["held"]["granted"] == 1);
  auto again = claim_cli(db, "u1", "b1", 0);  // the unblock granted it: the retry replays that grant
  CHECK(again["outcome"] == "replayed");
  CHECK(again["state"] == "success");
  CHECK(again["record_code"] == h["record_code"]);
  CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = 'b1' AND state = 'success'") == 1);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
}

// A request held on a whitelist activity takes no qualification; confirmed by the fuse it never
// does (cancelled), released it does (granted): reconcile is clean after each, never a false alarm
// on the qualifications (docs/design.md §6.4).
TEST_CASE("fuse held: a whitelist request held then confirmed, or released, reconciles clean") {
  TestDb db;
  db.migrate();
  Spec s;
  s.whitelist = true;
  seed(db, s);
  const int64_t aid = db.count("SELECT id FROM activity WHERE code = 'act'");
  {
    auto st = db.open();
    for (const char* u : {"w1", "w2"})
      st->exec("INSERT INTO qualification (activity_id, user_id, status, created_at, updated_at) "
               "VALUES ($1, $2, 'unused', 0, 0)",
               {aid, std::string(u)});
  }
  std::string ev = block(db, {"--prize", "p1"});
  CHECK(claim_cli(db, "w1", "b1", 1)["outcome"] == "held");
  db.ok({"fuse", "confirm", ev, "--reason", "fraud"});
  CHECK(db.count("SELECT count(*) FROM grants WHERE user_id = 'w1' AND state = 'cancelled'") == 1);
  CHECK(db.count("SELECT count(*) FROM qualification WHERE user_id = 'w1' AND status = 'unused'") == 1);
  auto r = db.ok({"reconcile", "-o", "json"});
  CHECK(json::parse(lines(r.out).back())["state"] == "clean");
  // a second hold, released: the grant takes the qualification then
  db.ok({"fuse", "unblock", "act", "--prize", "p1", "--reason", "done"});
  ev = block(db, {"--prize", "p1"});
  CHECK(claim_cli(db, "w2", "b2", 1)["outcome"] == "held");
  db.ok({"fuse", "release", ev, "--false-alarm", "-o", "json"});
  CHECK(db.count("SELECT count(*) FROM qualification WHERE user_id = 'w2' AND status = 'used'") == 1);
  r = db.ok({"reconcile", "-o", "json"});
  CHECK(json::parse(lines(r.out).back())["state"] == "clean");
}

// Held before midnight, released after: the grant is made at its release, and its day limit is
// counted (and would be given back) in the release's day; reconcile, which recomputes each grant's
// period from its creation, is clean.
TEST_CASE("fuse held: a request held before midnight and released after counts in the release's day") {
  TestDb db;
  db.migrate();
  Spec s;
  s.limit = 2;
  s.period = "day";
  s.timezone = "America/New_York";
  seed(db, s);
  const std::map<std::string, std::string> before{{"REWARDCTL_NOW", "2027-03-15T03:50:00Z"}};  // 23:50 EDT, Mar 14
  const std::map<std::string, std::string> after{{"REWARDCTL_NOW", "2027-03-15T04:10:00Z"}};   // 00:10 EDT, Mar 15
  db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1"}, 0, before);
  std::string ev = json::parse(db.ok({"fuse", "block", "act", "--prize", "p1", "--reason", "x", "-o", "json"}, 0,
                                     before).out)["event"];
  db.ok({"claim", "act", "--user", "u1", "--biz-id", "b2"}, 1, before);  // held
  db.ok({"fuse", "release", ev, "--false-alarm", "-o", "json"}, 0, after);
  CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = 'b2' AND state = 'success'") == 1);
  CHECK(db.count("SELECT used FROM limit_counter WHERE user_id = 'u1' AND period_key = '2027-03-15'") == 1);
  CHECK(db.count("SELECT used FROM limit_counter WHERE user_id = 'u1' AND period_key = '2027-03-14'") == 1);
  auto r = db.ok({"reconcile", "-o", "json"}, 0, after);
  CHECK(json::parse(lines(r.out).back())["state"] == "clean");
}
