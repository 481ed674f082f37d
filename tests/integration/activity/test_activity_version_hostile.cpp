// New definition versions attacked (core/activity/versions.hpp), on the backend under test: many
// updates at once, approvals racing, SIGKILL during the switch, a version that replaces every
// prize, and a huge definition.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/jobs.hpp"
#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

Spec prizes(const std::vector<std::string>& codes, int64_t stock = 100) {
  Spec s;
  s.custom_prizes = true;
  s.end = "2030-01-01T00:00:00+08:00";
  for (auto& c : codes)
    s.extra += "[[prizes]]\ncode = \"" + c + "\"\nitem = \"thing\"\namount = 1\nstock = " + std::to_string(stock) +
               "\nstock_buckets = 2\n";
  return s;
}

// The switch is all or nothing: either every trace of it is there, or none is.
bool switched(const TestDb& db) {
  const bool v2 = db.count("SELECT version FROM activity WHERE code = 'act'") == 2;
  CHECK(v2 == (db.count("SELECT count(*) FROM activity_version WHERE version = 2 AND state = 'current'") == 1));
  CHECK(v2 == (db.count("SELECT count(*) FROM activity_version WHERE version = 1 AND state = 'superseded'") == 1));
  CHECK(v2 == (db.count("SELECT count(*) FROM prize WHERE code = 'pb'") == 1));
  CHECK(v2 == (db.count("SELECT count(*) FROM prize WHERE code = 'pa' AND retired = 1") == 1));
  CHECK(v2 == (db.count("SELECT count(*) FROM audit WHERE action = 'activity.version.switch'") == 1));
  CHECK(db.count("SELECT count(*) FROM activity_version WHERE state = 'current'") == 1);
  return v2;
}

}  // namespace

TEST_CASE("version hostile: 8 updates at once propose exactly one version, the others change nothing") {
  TestDb db;
  db.migrate();
  seed(db, prizes({"pa"}));
  std::vector<std::string> files;
  for (int i = 0; i < 8; ++i) files.push_back(write_file(db.dir(), "v" + std::to_string(i) + ".toml",
                                                         definition(prizes({"pa", "p" + std::to_string(i)}))));
  std::vector<Run> runs(files.size());
  std::vector<std::thread> ts;
  for (size_t i = 0; i < files.size(); ++i)
    ts.emplace_back([&, i] { runs[i] = db.rc({"activity", "update", "-f", files[i], "--operator", "op" + std::to_string(i)}); });
  for (auto& t : ts) t.join();
  int ok = 0, busy = 0;
  for (auto& r : runs) {
    INFO(r.err);
    if (r.rc == 0) ++ok;
    else if (r.rc == 1 && r.err.find("in review") != std::string::npos) ++busy;
  }
  CHECK(ok == 1);
  CHECK(busy == 7);
  CHECK(db.count("SELECT count(*) FROM activity_version WHERE state = 'pending_review'") == 1);
  CHECK(db.count("SELECT count(*) FROM activity_version") == 2);
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'activity.version.propose'") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'activity_version'") == 2);
}

TEST_CASE("version hostile: tech approvals racing switch once, the losers change nothing") {
  TestDb db;
  db.migrate();
  seed(db, prizes({"pa"}));
  db.ok({"activity", "update", "-f", write_file(db.dir(), "v2.toml", definition(prizes({"pb"}))), "--operator", "dave"});
  // product approvals racing: one wins
  std::vector<Run> prod(4);
  {
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; ++i)
      ts.emplace_back([&, i] {
        prod[i] = db.rc({"activity", "approve", "act", "--as", "product", "--operator", "p" + std::to_string(i)});
      });
    for (auto& t : ts) t.join();
  }
  int wins = 0;
  for (auto& r : prod) {
    wins += r.rc == 0;
    CHECK((r.rc == 0 || r.rc == 1));
  }
  CHECK(wins == 1);
  std::vector<Run> tech(6);
  std::vector<std::thread> ts;
  for (int i = 0; i < 6; ++i)
    ts.emplace_back([&, i] { tech[i] = db.rc({"activity", "approve", "act", "--as", "tech", "--operator", "t" + std::to_string(i)}); });
  for (auto& t : ts) t.join();
  wins = 0;
  for (auto& r : tech) {
    INFO(r.err);
    wins += r.rc == 0;
    CHECK((r.rc == 0 || r.rc == 1));
  }
  CHECK(wins == 1);
  CHECK(switched(db));
  CHECK(db.count("SELECT count(*) FROM activity_review WHERE version = 2") == 2);
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'activity.version.approve'") == 2);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'activity_version'") == 5);  // 2 created, 2 moves of v2, v1 superseded
}

TEST_CASE("version hostile: SIGKILL during the switch leaves version 1 whole, and a later approval switches") {
  TestDb db;
  db.migrate();
  seed(db, prizes({"pa", "pk"}));
  db.ok({"claim", "act", "--user", "u0", "--biz-id", "b0"});
  db.ok({"activity", "update", "-f", write_file(db.dir(), "v2.toml", definition(prizes({"pb", "pk"}))), "--operator", "dave"});
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  const std::vector<std::string> tech{"activity", "approve", "act", "--as", "tech", "--operator", "carol"};

  if (is_pg()) {
    // deterministic: the switch blocks on a prize row this connection holds, after its first writes
    auto st = db.open();
    st->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
      tx.query("SELECT id FROM prize WHERE code = 'pk' FOR UPDATE");
      pid_t pid = spawn(db, tech);
      // the switch has written (its version rows and activity version) and now waits on our lock
      CHECK(eventually([&] {
        return db.count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE prize%'") > 0;
      }));
      kill(pid, SIGKILL);
      int stt = 0;
      waitpid(pid, &stt, 0);
      tx.rollback_only();
    });
    CHECK_FALSE(switched(db));
  }
  // kills at growing delays: every time, all or nothing
  bool done = false;
  for (int delay_ms : {0, 1, 3, 6, 10, 20, 40, 80, 160, 320}) {
    pid_t pid = spawn(db, tech);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(pid, SIGKILL);
    int stt = 0;
    waitpid(pid, &stt, 0);
    CAPTURE(delay_ms);
    done = switched(db);
    // claims follow whichever version is current, and record it
    auto j = last_json(db.ok({"claim", "act", "--user", "k" + std::to_string(delay_ms), "--biz-id",
                              "k" + std::to_string(delay_ms), "-o", "json"}));
    CHECK(j["prize"] == (done ? "pb" : "pa"));
    CHECK(j["pool_version"] == (done ? 2 : 1));
    if (done) break;
  }
  if (!done) db.ok(tech);
  CHECK(switched(db));
  CHECK(db.count("SELECT count(*) FROM activity_version WHERE state IN ('pending_review', 'product_approved')") == 0);
}

TEST_CASE("version hostile: a version that replaces every prize, and one with 300 prizes and 2000 listed users") {
  TestDb db;
  db.migrate();
  seed(db, prizes({"pa", "pk"}));
  db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1"});
  db.ok({"claim", "act", "--user", "u2", "--biz-id", "b2", "--prize", "pk"});
  // no prizes at all does not lint (65, nothing written)
  Spec none = prizes({});
  db.ok({"activity", "update", "-f", write_file(db.dir(), "none.toml", definition(none)), "--operator", "dave"}, 65);
  CHECK(db.count("SELECT count(*) FROM activity_version") == 1);

  std::vector<std::string> many;
  for (int i = 0; i < 300; ++i) many.push_back("n" + std::to_string(i));
  Spec big = prizes(many, 7);
  big.gray = "\"g0\"";
  for (int i = 1; i < 2000; ++i) big.gray += ", \"g" + std::to_string(i) + "\"";
  db.ok({"activity", "update", "-f", write_file(db.dir(), "big.toml", definition(big)), "--operator", "dave"});
  auto d = last_json(db.ok({"activity", "diff", "act", "-o", "json"}));
  int added = 0, removed = 0;
  for (auto& c : d["changes"]) {
    if (c["section"] == "prize") (c["change"] == "added" ? added : removed) += 1;
  }
  CHECK(added == 300);
  CHECK(removed == 2);
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
  CHECK(db.count("SELECT count(*) FROM prize WHERE retired = 1") == 2);
  CHECK(db.count("SELECT count(*) FROM prize WHERE retired = 0") == 300);
  CHECK(db.count("SELECT count(*) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.retired = 0") == 600);
  CHECK(db.count("SELECT SUM(remain) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.retired = 1") == 198);
  CHECK(db.count("SELECT count(*) FROM activity_user_list WHERE list = 'gray'") == 2000);
  auto j = last_json(db.ok({"claim", "act", "--user", "u3", "--biz-id", "b3", "-o", "json"}));
  CHECK(j["prize"] == "n0");
  CHECK(j["pool_version"] == 2);
  last_json(db.ok({"claim", "act", "--user", "u4", "--biz-id", "b4", "--prize", "n299", "-o", "json"}));
  CHECK(last_json(db.ok({"claim", "act", "--user", "u5", "--biz-id", "b5", "--prize", "pk", "-o", "json"}, 1))["reason"] ==
        "not_found");
  // a reversal of a grant of a retired prize still returns its unit
  db.ok({"reverse", "--biz-id", "b2", "--reason", "refund", "--yes"});
  CHECK(db.count("SELECT SUM(remain) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.code = 'pk'") == 100);
}

TEST_CASE("version hostile: the switch waits for a claim in flight, which commits under the version it read") {
  TestDb db;
  db.migrate();
  seed(db, prizes({"pa"}));
  db.ok({"activity", "update", "-f", write_file(db.dir(), "v2.toml", definition(prizes({"pb"}))), "--operator", "dave"});
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  auto box = engine(db);
  pid_t pid = 0;
  box.store->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
    rc::engine::ClaimRequest r;
    r.activity = "act";
    r.user = "u1";
    r.biz_id = "in-flight";
    auto o = box.engine->claim_many(tx, {r});
    REQUIRE(o.at(0).status == rc::engine::Status::granted);
    CHECK(o[0].grant->prize == "pa");
    CHECK(*o[0].grant->pool_version == 1);
    // the tech approval starts while this claim is open: it must wait for it
    pid = spawn(db, {"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
    if (is_pg())
      CHECK(eventually([&] {
        return db.count("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE "
                        "'%pg_advisory_xact_lock(%'") == 1;
      }));
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(db.count("SELECT version FROM activity WHERE code = 'act'") == 1);
  });
  int stt = 0;
  waitpid(pid, &stt, 0);
  CHECK(WIFEXITED(stt));
  CHECK(WEXITSTATUS(stt) == 0);
  CHECK(switched(db));
  // the claim committed before the switch, under version 1; the next one follows version 2
  CHECK(db.count("SELECT pool_version FROM grants WHERE biz_id = 'in-flight'") == 1);
  auto j = last_json(db.ok({"claim", "act", "--user", "u2", "--biz-id", "after", "-o", "json"}));
  CHECK(j["prize"] == "pb");
  CHECK(j["pool_version"] == 2);
}
