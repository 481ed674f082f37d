// Activity lifecycle through the real binary: create, the two-role review, gray then full publish,
// pause/resume/offline, every illegal transition, concurrent transitions, and the read side.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {
std::string create_file(const TestDb& db, const Spec& s = Spec{}) { return write_file(db.dir(), s.code + ".toml", definition(s)); }
int64_t logs(const TestDb& db) { return db.count("SELECT count(*) FROM status_log WHERE entity = 'activity'"); }
std::string state(const TestDb& db) {
  auto r = db.open()->query("SELECT state FROM activity WHERE code = 'act'");
  return r.empty() ? "" : r[0].str(0);
}
void approved(const TestDb& db) {
  db.ok({"activity", "create", "-f", create_file(db), "--operator", "alice"});
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
}
}  // namespace

TEST_CASE("activity: the whole lifecycle, one status-log row per transition") {
  TestDb db;
  db.migrate();
  auto c = db.ok({"activity", "create", "-f", create_file(db), "--operator", "alice", "-o", "json"});
  auto cj = json::parse(c.out);
  CHECK(cj["state"] == "pending_review");
  CHECK(cj["definition_hash"].get<std::string>().size() == 64);
  CHECK(state(db) == "pending_review");
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob", "--comment", "ok by product"});
  CHECK(state(db) == "product_approved");
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
  CHECK(state(db) == "approved");
  db.ok({"activity", "publish", "act", "--gray"});
  CHECK(state(db) == "gray");
  db.ok({"activity", "publish", "act", "--full"});
  CHECK(state(db) == "live");
  db.ok({"activity", "pause", "act", "--reason", "incident"});
  CHECK(state(db) == "paused");
  db.ok({"activity", "resume", "act"});
  CHECK(state(db) == "live");
  db.ok({"activity", "offline", "act", "--reason", "done", "--yes"});
  CHECK(state(db) == "offline");
  CHECK(logs(db) == 8);  // created + 7 transitions
  auto h = db.ok({"activity", "history", "act", "-o", "json"});
  auto hl = lines(h.out);
  REQUIRE(hl.size() >= 8);
  CHECK(json::parse(hl.front())["to"] == "pending_review");
  std::string last_status;
  for (auto& l : hl) {
    auto j = json::parse(l);
    if (j["source"] == "status_log") last_status = j["to"];
  }
  CHECK(last_status == "offline");
  auto show = json::parse(db.ok({"activity", "show", "act", "-o", "json"}).out);
  CHECK(show["state"] == "offline");
  CHECK(show["reviews"].size() == 2);
  CHECK(show["reviews"][0]["operator"] == "bob");
  CHECK(show["prizes"][0]["stock_left"] == 100);
  CHECK(show["end_utc"] == "2098-12-31T16:00:00.000Z");
  auto list = db.ok({"activity", "list", "--state", "offline", "-o", "json"});
  CHECK(lines(list.out).size() == 1);
  CHECK(lines(db.ok({"activity", "list", "--state", "live", "-o", "json"}).out).empty());
  CHECK(db.count("SELECT count(*) FROM audit WHERE entity = 'activity'") >= 8);
}

TEST_CASE("activity: every illegal transition exits 1 naming the current state and changes nothing") {
  TestDb db;
  db.migrate();
  db.ok({"activity", "create", "-f", create_file(db), "--operator", "alice"});
  struct Case {
    std::vector<std::string> args;
  };
  // from pending_review
  std::vector<std::vector<std::string>> illegal_pending = {
      {"activity", "approve", "act", "--as", "tech", "--operator", "carol"},
      {"activity", "publish", "act", "--gray"},
      {"activity", "publish", "act", "--full"},
      {"activity", "pause", "act"},
      {"activity", "resume", "act"}};
  for (auto& a : illegal_pending) {
    int64_t before = logs(db);
    auto r = db.ok(a, 1);
    CHECK(r.err.find("is pending_review") != std::string::npos);
    CHECK(logs(db) == before);
  }
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "dave"}, 1);  // already product_approved
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
  for (auto& a : std::vector<std::vector<std::string>>{{"activity", "approve", "act", "--as", "tech", "--operator", "x"},
                                                       {"activity", "reject", "act", "--as", "tech", "--reason", "r"},
                                                       {"activity", "pause", "act"},
                                                       {"activity", "resume", "act"}}) {
    auto r = db.ok(a, 1);
    CHECK(r.err.find("is approved") != std::string::npos);
  }
  db.ok({"activity", "publish", "act", "--gray"});
  auto same = db.ok({"activity", "publish", "act", "--gray", "-o", "json"}, 1);  // to the state it is already in
  CHECK(json::parse(same.out)["state"] == "gray");
  CHECK(json::parse(same.out)["changed"] == false);
  db.ok({"activity", "publish", "act", "--full"});
  db.ok({"activity", "publish", "act", "--full"}, 1);
  db.ok({"activity", "resume", "act"}, 1);
  db.ok({"activity", "pause", "act"});
  db.ok({"activity", "pause", "act"}, 1);
  db.ok({"activity", "offline", "act", "--reason", "x", "--yes"});
  for (auto& a : std::vector<std::vector<std::string>>{{"activity", "offline", "act", "--reason", "x", "--yes"},
                                                       {"activity", "resume", "act"},
                                                       {"activity", "publish", "act", "--full"}}) {
    auto r = db.ok(a, 1);
    CHECK(r.err.find("is offline") != std::string::npos);
  }
  CHECK(state(db) == "offline");
}

TEST_CASE("activity: reject, and the dry-run twin of each transition") {
  TestDb db;
  db.migrate();
  db.ok({"activity", "create", "-f", create_file(db), "--operator", "alice"});
  db.ok({"activity", "reject", "act", "--as", "product", "--operator", "bob"}, 64);  // --reason is required
  auto d = db.ok({"activity", "reject", "act", "--as", "product", "--reason", "no", "--dry-run", "-o", "json"});
  CHECK(json::parse(d.out)["dry_run"] == true);
  CHECK(state(db) == "pending_review");
  db.ok({"activity", "reject", "act", "--as", "product", "--reason", "budget too high", "--operator", "bob"});
  CHECK(state(db) == "rejected");
  CHECK(db.count("SELECT count(*) FROM activity_review WHERE decision = 'reject'") == 1);
}

TEST_CASE("activity: two-person rules") {
  TestDb db;
  db.migrate();
  db.ok({"activity", "create", "-f", create_file(db), "--operator", "alice"});
  auto r = db.ok({"activity", "approve", "act", "--as", "product", "--operator", "alice"}, 77);
  CHECK(r.err.find("creator_may_not_approve") != std::string::npos);
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  auto r2 = db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "bob"}, 77);
  CHECK(r2.err.find("distinct_approvers") != std::string::npos);
  CHECK(state(db) == "product_approved");
  // policy off: the same person may give both approvals (never the creator)
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "alice"}, 77,
        {{"REWARDCTL_REVIEW_DISTINCT_APPROVERS", "false"}});
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "bob"}, 0,
        {{"REWARDCTL_REVIEW_DISTINCT_APPROVERS", "false"}});
  CHECK(state(db) == "approved");
  CHECK(db.count("SELECT count(*) FROM activity_review WHERE voided = 0") == 2);
}

TEST_CASE("activity: a definition changed after approval voids the approvals") {
  TestDb db;
  db.migrate();
  approved(db);
  int64_t reviews = db.count("SELECT count(*) FROM activity_review WHERE voided = 0");
  CHECK(reviews == 2);
  // unchanged file: nothing happens
  db.ok({"activity", "update", "-f", create_file(db)});
  CHECK(state(db) == "approved");
  Spec changed;
  changed.stock = 50;
  db.ok({"activity", "update", "-f", create_file(db, changed), "--operator", "alice"});
  CHECK(state(db) == "pending_review");
  CHECK(db.count("SELECT count(*) FROM activity_review WHERE voided = 0") == 0);
  CHECK(db.count("SELECT version FROM activity") == 2);
  CHECK(db.count("SELECT SUM(total) FROM stock") == 50);
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"}, 1);
  auto show = json::parse(db.ok({"activity", "show", "act", "-o", "json"}).out);
  CHECK(show["reviews"][0]["voided"] == true);
  // a live activity's update is a new version in review: the running one keeps its stock
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
  db.ok({"activity", "publish", "act", "--full"});
  Spec again;
  again.stock = 70;
  auto up = json::parse(db.ok({"activity", "update", "-f", create_file(db, again), "-o", "json"}).out);
  CHECK(up["version"] == 3);
  CHECK(up["version_state"] == "pending_review");
  CHECK(state(db) == "live");
  CHECK(db.count("SELECT version FROM activity") == 2);
  CHECK(db.count("SELECT SUM(total) FROM stock") == 50);
}

TEST_CASE("activity: concurrent publish and approve yield exactly one transition and one status-log row") {
  TestDb db;
  db.migrate();
  db.ok({"activity", "create", "-f", create_file(db), "--operator", "alice"});
  auto race = [&](std::vector<std::string> args, int n) {
    std::vector<Run> rs(n);
    std::vector<std::thread> ts;
    for (int i = 0; i < n; ++i) ts.emplace_back([&, i] { rs[i] = db.rc(args); });
    for (auto& t : ts) t.join();
    int ok = 0, refused = 0;
    for (auto& r : rs) {
      INFO(r.all());
      if (r.rc == 0) ++ok;
      else if (r.rc == 1) ++refused;
    }
    CHECK(ok == 1);
    CHECK(refused == n - 1);
  };
  int64_t before = logs(db);
  race({"activity", "approve", "act", "--as", "product", "--operator", "bob"}, 6);
  CHECK(logs(db) == before + 1);
  CHECK(db.count("SELECT count(*) FROM activity_review") == 1);
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
  before = logs(db);
  race({"activity", "publish", "act", "--full"}, 6);
  CHECK(logs(db) == before + 1);
  CHECK(state(db) == "live");
}

TEST_CASE("activity: create refuses bad input with 65 and writes nothing") {
  TestDb db;
  db.migrate();
  auto nothing = [&] { CHECK(db.count("SELECT count(*) FROM activity") == 0); };
  SUBCASE("malformed TOML") {
    auto f = write_file(db.dir(), "bad.toml", "code = \"x\"\nname = \n");
    auto r = db.ok({"activity", "create", "-f", f}, 65);
    CHECK(r.err.find(f + ":2:") != std::string::npos);
    nothing();
  }
  SUBCASE("amount as a float, negative stock, bad code, unknown zone") {
    for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"amount = 1\n", "amount = 1.5\n"},
             {"stock = 100\n", "stock = -5\n"},
             {"code = \"act\"", "code = \"Act!\""},
             {"timezone = \"Asia/Shanghai\"", "timezone = \"Asia/Atlantis\""}}) {
      std::string t = definition(Spec{});
      auto pos = t.find(from);
      REQUIRE(pos != std::string::npos);
      t.replace(pos, from.size(), to);
      auto f = write_file(db.dir(), "bad.toml", t);
      CAPTURE(to);
      db.ok({"activity", "create", "-f", f}, 65);
      nothing();
    }
  }
  SUBCASE("missing file -> 66") { db.ok({"activity", "create", "-f", db.dir() + "/none.toml"}, 66); }
  SUBCASE("existing code -> 65") {
    auto f = create_file(db);
    db.ok({"activity", "create", "-f", f});
    auto r = db.ok({"activity", "create", "-f", f}, 65);
    CHECK(r.err.find("already exists") != std::string::npos);
    CHECK(db.count("SELECT count(*) FROM activity") == 1);
  }
  SUBCASE("--dry-run writes nothing") {
    auto r = db.ok({"activity", "create", "-f", create_file(db), "--dry-run", "-o", "json"});
    CHECK(json::parse(r.out)["dry_run"] == true);
    nothing();
    CHECK(db.count("SELECT count(*) FROM stock") == 0);
  }
  SUBCASE("--publish needs review.required = false") {
    db.ok({"activity", "create", "-f", create_file(db), "--publish"}, 77);
    nothing();
  }
}

TEST_CASE("activity: create --publish with review waived goes live and the audit says so") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  CHECK(state(db) == "live");
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'activity.review_waived'") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'activity' AND reason LIKE 'review waived%'") == 1);
}
