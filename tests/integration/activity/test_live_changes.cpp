// Live changes through the real binary on the backend under test: blacklist and gray list while a
// list-issue worker runs, stock added and removed without oversell, budget raised by two people,
// a budget never set below what is consumed, and bad input refused with nothing written.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/activity/live.hpp"
#include "support/jobs.hpp"
#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

int64_t audits(const TestDb& db, const std::string& action) {
  return db.count("SELECT count(*) FROM audit WHERE action = $1", {action});
}

std::string claim_reason(const TestDb& db, const std::string& user, const std::string& biz, int rc) {
  auto j = rt::last_json(db.ok({"claim", "act", "--user", user, "--biz-id", biz, "-o", "json"}, rc));
  return j.contains("reason") && !j["reason"].is_null() ? j["reason"].get<std::string>() : "";
}

}  // namespace

TEST_CASE("live: a user blacklisted while a list-issue worker runs is refused from the next claim on") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 1000;
  seed(db, s);
  std::string csv = "user_id\n";
  for (int i = 0; i < 400; ++i) csv += "u" + std::to_string(i) + "\n";
  write_file(db.dir(), "l.csv", csv);
  auto plan = rt::last_json(db.ok({"list-issue", "plan", "act", db.dir() + "/l.csv", "--prize", "p1", "-o", "json",
                               "--operator", "alice"}));
  const std::string batch = plan["batch"];
  db.ok({"list-issue", "approve", batch, "--operator", "bob"});

  std::vector<std::string> args{REWARDCTL_BIN, "--db", db.url(), "list-issue", "run", batch, "--progress", "none",
                                "--rate", "50", "--chunk", "5"};
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(REWARDCTL_BIN, argv.data());
    _exit(127);
  }
  auto finished = [&] { return db.count("SELECT count(*) FROM list_item WHERE state <> 'pending'"); };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finished() < 20 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // the last 50 users of the list, from a file, while the worker is ~8 s away from them at 50/s
  std::string black = "user_id\n";
  for (int i = 350; i < 400; ++i) black += "u" + std::to_string(i) + "\n";
  write_file(db.dir(), "black.csv", black);
  auto r = rt::last_json(db.ok({"activity", "blacklist", "add", "act", "-f", db.dir() + "/black.csv", "-o", "json"}));
  CHECK(r["changed"] == 50);
  CHECK(r["requested"] == 50);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);  // some users rejected
  CHECK(db.count("SELECT count(*) FROM list_item WHERE state = 'rejected' AND reason = 'blacklisted'") == 50);
  CHECK(db.count("SELECT count(*) FROM list_item WHERE state = 'issued'") == 350);
  CHECK(db.count("SELECT count(*) FROM grants WHERE user_id IN ('u350', 'u399')") == 0);
  CHECK(audits(db, "activity.blacklist.add") == 1);

  // a direct claim too; removed from the list, the user claims again
  CHECK(claim_reason(db, "u399", "b-1", 1) == "blacklisted");
  auto rm = rt::last_json(db.ok({"activity", "blacklist", "remove", "act", "u399", "nobody", "-o", "json"}));
  CHECK(rm["changed"] == 1);
  CHECK(rm["requested"] == 2);
  claim_reason(db, "u399", "b-2", 0);
  CHECK(db.count("SELECT count(*) FROM grants WHERE user_id = 'u399'") == 1);
}

TEST_CASE("live: gray list changes decide who may claim in a gray activity, and bad input writes nothing") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  // a gray activity (seeded live, then moved to gray with its log row: publish --gray needs review)
  Spec g;
  g.code = "grayact";
  g.gray = "\"g1\"";
  seed(db, g);
  auto st = db.open();
  st->exec("UPDATE activity SET state = 'gray' WHERE code = 'grayact'");
  st->exec("INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, created_at) SELECT 'activity', id, "
           "'live', 'gray', 'test', 0 FROM activity WHERE code = 'grayact'");
  auto claim = [&](const std::string& user, const std::string& biz, int rc) {
    return rt::last_json(db.ok({"claim", "grayact", "--user", user, "--biz-id", biz, "-o", "json"}, rc));
  };
  claim("g2", "x1", 1);
  db.ok({"activity", "gray", "add", "grayact", "g2"});
  claim("g2", "x2", 0);
  db.ok({"activity", "gray", "remove", "grayact", "g1", "--dry-run"});
  claim("g1", "x3", 0);  // the dry run removed nothing
  db.ok({"activity", "gray", "remove", "grayact", "g1"});
  claim("g1", "x4", 1);

  const int64_t before = db.count("SELECT count(*) FROM activity_user_list") + db.count("SELECT count(*) FROM audit");
  write_file(db.dir(), "bad.csv", "user_id\nok1\n\"\"\n");
  auto bad = db.ok({"activity", "blacklist", "add", "act", "-f", db.dir() + "/bad.csv"}, 65);
  CHECK(bad.err.find("bad.csv:3") != std::string::npos);
  db.ok({"activity", "blacklist", "add", "act"}, 64);
  db.ok({"activity", "blacklist", "add", "act", std::string(65, 'x')}, 64);
  db.ok({"activity", "blacklist", "add", "nope", "u1"}, 67);  // an unknown activity is not found, as in every command
  CHECK(db.count("SELECT count(*) FROM activity_user_list") + db.count("SELECT count(*) FROM audit") == before);
}

TEST_CASE("live: stock added and removed while it runs, claimed to exhaustion without oversell") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 10;
  s.buckets = 4;
  s.item_kind = "virtual";
  s.unit_cost = 0;  // costs nothing: stock added applies at once even with review required
  seed(db, s);
  auto a = rt::last_json(db.ok({"activity", "stock", "act", "--prize", "p1", "--add", "7", "--reason", "more", "-o", "json"}));
  CHECK(a["state"] == "applied");
  CHECK(a["before"] == 10);
  CHECK(a["after"] == 17);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 17);
  CHECK(db.count("SELECT max(total) - min(total) FROM stock") <= 1);  // spread over the buckets
  // remove more than is left: refused, nothing changed
  auto r = db.ok({"activity", "stock", "act", "--prize", "p1", "--remove", "18", "--reason", "x"}, 65);
  CHECK(r.err.find("has 17 left") != std::string::npos);
  db.ok({"activity", "stock", "act", "--prize", "p1", "--remove", "2", "--reason", "short"});
  CHECK(db.count("SELECT stock_total FROM prize") == 15);
  db.ok({"activity", "stock", "act", "--prize", "nope", "--add", "1", "--reason", "x"}, 67);
  db.ok({"activity", "stock", "act", "--prize", "p1", "--add", "0", "--reason", "x"}, 64);
  db.ok({"activity", "stock", "act", "--prize", "p1", "--add", "1", "--remove", "1", "--reason", "x"}, 64);

  // claimed to exhaustion by concurrent threads: exactly 15 grants
  std::vector<std::thread> ts;
  std::atomic<int> granted{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      auto box = engine(db);
      for (int i = 0; i < 10; ++i) {
        auto o = rt::claim(*box.engine, "act", "t" + std::to_string(t) + "_" + std::to_string(i),
                           "c" + std::to_string(t) + "_" + std::to_string(i));
        if (o.status != rc::engine::Status::rejected) ++granted;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(granted == 15);
  CHECK(db.count("SELECT count(*) FROM grants") == 15);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 0);
  // nothing left to remove
  db.ok({"activity", "stock", "act", "--prize", "p1", "--remove", "1", "--reason", "x"}, 65);
  CHECK(db.count("SELECT count(*) FROM change_request WHERE state = 'applied'") == 2);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'change_request'") == 2);
}

TEST_CASE("live: money needs two people - a budget raise and costly stock wait for another operator") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 5;
  s.budget = 300;  // 3 claims of 100 cents
  seed(db, s);
  auto p = rt::last_json(db.ok({"activity", "budget", "act", "--raise", "200", "--reason", "demand", "--operator", "alice",
                            "-o", "json"}));
  CHECK(p["state"] == "proposed");
  const int64_t id = p["id"];
  CHECK(db.count("SELECT authorised_cents FROM budget") == 300);  // nothing until approved
  // the proposer cannot approve; the dry run of another changes nothing
  auto self = db.ok({"activity", "change", "approve", std::to_string(id), "--operator", "alice"}, 77);
  CHECK(self.err.find("another operator") != std::string::npos);
  db.ok({"activity", "change", "approve", std::to_string(id), "--operator", "bob", "--dry-run"});
  CHECK(db.count("SELECT authorised_cents FROM budget") == 300);
  auto ok = rt::last_json(db.ok({"activity", "change", "approve", std::to_string(id), "--operator", "bob", "-o", "json"}));
  CHECK(ok["state"] == "applied");
  CHECK(ok["before"] == 300);
  CHECK(ok["after"] == 500);
  CHECK(db.count("SELECT authorised_cents FROM budget") == 500);
  // approving twice is refused and applies nothing
  db.ok({"activity", "change", "approve", std::to_string(id), "--operator", "carol"}, 1);
  CHECK(db.count("SELECT authorised_cents FROM budget") == 500);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'change_request' AND entity_id = $1", {id}) == 2);
  CHECK(audits(db, "activity.change.approve") == 1);

  // stock of a prize that costs money: proposed; a rejected change applies nothing
  auto st = rt::last_json(db.ok({"activity", "stock", "act", "--prize", "p1", "--add", "3", "--reason", "more",
                             "--operator", "alice", "-o", "json"}));
  CHECK(st["state"] == "proposed");
  db.ok({"activity", "change", "reject", std::to_string(st["id"].get<int64_t>()), "--reason", "no", "--operator", "bob"});
  CHECK(db.count("SELECT stock_total FROM prize") == 5);
  CHECK(db.count("SELECT count(*) FROM change_request WHERE state = 'rejected' AND decision_reason = 'no'") == 1);

  // spend 4 claims (400 cents), then a budget set below consumed is refused, at or above it applies
  for (int i = 0; i < 4; ++i) claim_reason(db, "u" + std::to_string(i), "b" + std::to_string(i), 0);
  auto low = db.ok({"activity", "budget", "act", "--set", "399", "--reason", "cut"}, 65);
  CHECK(low.err.find("400 cents are consumed") != std::string::npos);
  auto set = rt::last_json(db.ok({"activity", "budget", "act", "--set", "400", "--reason", "cut", "-o", "json"}));
  CHECK(set["state"] == "applied");  // no higher: at once
  CHECK(claim_reason(db, "u9", "b9", 1) == "budget_exhausted");
  // every change is listed (the refused --set 399 stored nothing), newest first
  auto lst = db.ok({"activity", "change", "list", "--activity", "act", "-o", "json"});
  auto ls = lines(lst.out);
  REQUIRE(ls.size() == 3);
  CHECK(json::parse(ls[0])["kind"] == "budget_set");
  CHECK(json::parse(ls[2])["kind"] == "budget_raise");
  CHECK(lines(db.ok({"activity", "change", "list", "--state", "proposed", "-o", "json"}).out).empty());
  db.ok({"activity", "budget", "act", "--raise", "0", "--reason", "x"}, 64);
  db.ok({"activity", "budget", "act", "--raise", "1"}, 64);  // --reason is required
  db.ok({"activity", "change", "approve", "999999", "--operator", "bob"}, 67);
}

TEST_CASE("live: concurrent budget raises and stock adds all apply, one after the other (no lost update)") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 500;
  s.buckets = 3;
  s.budget = 100000;
  seed(db, s);
  namespace live = rc::activity::live;
  const int n = 8;
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      auto st = db.open();
      const rc::activity::Actor who{"op" + std::to_string(i), false};
      if (i % 2 == 0)
        live::request(*st, {live::ChangeKind::budget_raise, "act", "", 100, "r"}, false, who, 1);
      else
        live::request(*st, {live::ChangeKind::stock_add, "act", "p1", 10, "s"}, false, who, 1);
    });
  for (auto& t : ts) t.join();
  CHECK(db.count("SELECT authorised_cents FROM budget") == 100000 + 100 * n / 2);
  CHECK(db.count("SELECT stock_total FROM prize") == 500 + 10 * n / 2);
  CHECK(db.count("SELECT sum(total) FROM stock") == 500 + 10 * n / 2);
  // each applied change starts where the one before it ended
  CHECK(db.count("SELECT count(DISTINCT before_value) FROM change_request WHERE kind = 'budget_raise'") == n / 2);
  CHECK(db.count("SELECT count(DISTINCT before_value) FROM change_request WHERE kind = 'stock_add'") == n / 2);

  // a proposal's dry run names no change id; an unknown activity's list is an error
  auto d = rt::last_json(db.ok({"activity", "budget", "act", "--raise", "5", "--reason", "d", "--dry-run", "-o", "json"}));
  CHECK(d["id"].is_null());
  CHECK(d["message"].get<std::string>().find("change approve") == std::string::npos);
  db.ok({"activity", "change", "list", "--activity", "nope"}, 67);  // not found, as everywhere
}

TEST_CASE("live: a stock change takes the buckets in bucket order, as a claim chunk does, and spreads as before") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 300;
  s.buckets = 3;
  seed(db, s);
  namespace live = rc::activity::live;
  // totals 110, 100, 90: an add goes to the emptiest bucket first, a removal takes from the fullest
  db.open()->exec("UPDATE stock SET total = total + 10, remain = remain + 10 WHERE bucket = 0");
  db.open()->exec("UPDATE stock SET total = total - 10, remain = remain - 10 WHERE bucket = 2");
  auto bucket = [&](int b) { return db.count("SELECT total FROM stock WHERE bucket = $1", {int64_t(b)}); };
  const rc::activity::Actor who{"op", false};
  live::request(*db.open(), {live::ChangeKind::stock_add, "act", "p1", 1, "one more"}, false, who, 1);
  CHECK(bucket(0) == 110);
  CHECK(bucket(1) == 100);
  CHECK(bucket(2) == 91);
  live::request(*db.open(), {live::ChangeKind::stock_remove, "act", "p1", 15, "fewer"}, false, who, 1);
  CHECK(bucket(0) == 95);  // the fullest gave all 15
  CHECK(bucket(1) == 100);
  CHECK(bucket(2) == 91);
  CHECK(db.count("SELECT stock_total FROM prize") == 286);

  if (is_pg()) {
    // A transaction holding bucket 0 (as a chunk does, on its way to bucket 2): the change waits for
    // bucket 0 holding no bucket, so the chunk's next bucket is free. (Before, the change took the
    // emptiest bucket 2 first: the chunk then waited on it, crosswise, until one of the two was
    // aborted as a deadlock; lock_timeout makes that wait an error here.)
    auto st = db.open();
    std::thread change;
    st->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
      tx.exec("UPDATE stock SET remain = remain WHERE bucket = 0");
      change = std::thread([&] {
        live::request(*db.open(), {live::ChangeKind::stock_add, "act", "p1", 2, "two more"}, false, who, 1);
      });
      CHECK(eventually([&] {
        return db.count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                        "'SELECT bucket, total, remain FROM stock%'") > 0;
      }));
      bool blocked = false;
      try {
        tx.exec_script("SET LOCAL lock_timeout = '300ms'");
        tx.exec("UPDATE stock SET remain = remain WHERE bucket = 2");
      } catch (const std::exception& e) {
        blocked = true;
        MESSAGE("the chunk's second bucket: " << e.what());
      }
      CHECK_FALSE(blocked);
      tx.rollback_only();
    });
    change.join();  // (it had waited for bucket 0 until that rollback)
    CHECK(bucket(0) == 96);  // the emptiest two got one each: 91 and 95
    CHECK(bucket(1) == 100);
    CHECK(bucket(2) == 92);
    CHECK(db.count("SELECT stock_total FROM prize") == 288);
  }
}
