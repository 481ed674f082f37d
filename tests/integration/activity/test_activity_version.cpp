// A new definition version for a running activity (core/activity/versions.hpp), through the real
// binary and in-process engines on the backend under test: N keeps running while N+1 is reviewed,
// the proposer cannot approve, the tech approval switches atomically while 16 workers claim (every
// grant follows exactly one version's rules and records it), stock carries over by prize code, a
// removed prize is never granted after the switch, diff and history, and bad input writes nothing.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;
using rc::engine::Status;

namespace {

// Direct activity `act`: the first prize is the one a claim gets. Version N: pa first, pk kept;
// version N+1: pb first, pk kept (its file stock differs: the running stock carries over), pa gone.
Spec version_spec(const std::string& first, int64_t first_stock, int64_t kept_stock) {
  Spec s;
  s.custom_prizes = true;
  s.end = "2030-01-01T00:00:00+08:00";
  s.extra = "[[prizes]]\ncode = \"" + first + "\"\nitem = \"thing\"\namount = 1\nstock = " + std::to_string(first_stock) +
            "\nstock_buckets = 4\n[[prizes]]\ncode = \"pk\"\nitem = \"thing\"\namount = 2\nstock = " +
            std::to_string(kept_stock) + "\nstock_buckets = 3\n";
  return s;
}

json claim_json(const TestDb& db, const std::string& user, const std::string& biz, int rc = 0,
                const std::vector<std::string>& more = {}) {
  std::vector<std::string> args{"claim", "act", "--user", user, "--biz-id", biz, "-o", "json"};
  args.insert(args.end(), more.begin(), more.end());
  return last_json(db.ok(args, rc));
}

// Everything a refused command must leave untouched.
int64_t footprint(const TestDb& db) {
  return db.count("SELECT count(*) FROM activity_version") + db.count("SELECT count(*) FROM audit") +
         db.count("SELECT count(*) FROM activity_review") + db.count("SELECT count(*) FROM status_log") +
         db.count("SELECT version FROM activity WHERE code = 'act'") * 1000;
}

}  // namespace

TEST_CASE("version: update of a live activity keeps N running until the two-role review switches to N+1") {
  TestDb db;
  db.migrate();
  seed(db, version_spec("pa", 100, 50));
  const int64_t pk_id = db.count("SELECT id FROM prize WHERE code = 'pk'");
  // stock added live to the kept prize, and some of it claimed under N: both carry over
  auto ch = last_json(db.ok({"activity", "stock", "act", "--prize", "pk", "--add", "10", "--reason", "top up",
                             "--operator", "alice", "-o", "json"}));
  db.ok({"activity", "change", "approve", std::to_string(ch["id"].get<int64_t>()), "--operator", "bob"});
  claim_json(db, "k1", "k1", 0, {"--prize", "pk"});
  CHECK(claim_json(db, "u1", "b1")["prize"] == "pa");

  auto f = write_file(db.dir(), "v2.toml", definition(version_spec("pb", 30, 999)));
  auto dry = last_json(db.ok({"activity", "update", "-f", f, "--operator", "dave", "--dry-run", "-o", "json"}));
  CHECK(dry["version_state"] == "pending_review");
  CHECK(db.count("SELECT count(*) FROM activity_version") == 1);
  auto up = last_json(db.ok({"activity", "update", "-f", f, "--operator", "dave", "-o", "json"}));
  CHECK(up["state"] == "live");
  CHECK(up["version"] == 2);
  CHECK(up["version_state"] == "pending_review");
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'activity.version.propose'") == 1);

  // N keeps running: claims follow version 1
  auto g = claim_json(db, "u2", "b2");
  CHECK(g["prize"] == "pa");
  CHECK(g["pool_version"] == 1);
  CHECK(db.count("SELECT version FROM activity WHERE code = 'act'") == 1);

  // the diff: running version 1 -> version 2 in review
  auto d = last_json(db.ok({"activity", "diff", "act", "-o", "json"}));
  CHECK(d["from"]["version"] == 1);
  CHECK(d["to"]["version"] == 2);
  CHECK(d["to"]["state"] == "pending_review");
  int seen = 0;
  for (auto& c : d["changes"]) {
    if (c["section"] == "prize" && c["key"] == "pa") CHECK((c["change"] == "removed" && ++seen));
    if (c["section"] == "prize" && c["key"] == "pb") CHECK((c["change"] == "added" && ++seen));
    if (c["section"] == "prize" && c["key"] == "pk" && c["field"] == "stock") {
      CHECK(c["from"] == "50");
      CHECK(c["to"] == "999");
      CHECK(c["note"].get<std::string>().find("carries over") != std::string::npos);
      ++seen;
    }
  }
  CHECK(seen == 3);
  auto text = db.ok({"activity", "diff", "act"});
  CHECK(text.out.find("act: version 1 (current) -> version 2 (pending_review)") != std::string::npos);
  CHECK(text.out.find("retired: no longer drawn") != std::string::npos);

  // the proposer cannot approve (77), nothing written; product, then tech by someone else
  const int64_t before = footprint(db);
  auto self = db.ok({"activity", "approve", "act", "--as", "product", "--operator", "dave"}, 77);
  CHECK(self.err.find("creator_may_not_approve") != std::string::npos);
  CHECK(footprint(db) == before);
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "bob"}, 1);  // product first
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  CHECK(claim_json(db, "u3", "b3")["prize"] == "pa");  // still N
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "bob"}, 77);  // distinct approvers
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "dave"}, 77);
  auto drysw = last_json(db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol", "--dry-run", "-o", "json"}));
  CHECK(drysw["dry_run"] == true);
  CHECK(db.count("SELECT version FROM activity WHERE code = 'act'") == 1);
  auto sw = last_json(db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol", "-o", "json"}));
  CHECK(sw["version"] == 2);
  CHECK(sw["state"] == "current");

  // N+1 runs: pb only, pa is never granted again (not even asked for by name)
  CHECK(db.count("SELECT version FROM activity WHERE code = 'act'") == 2);
  auto g2 = claim_json(db, "u4", "b4");
  CHECK(g2["prize"] == "pb");
  CHECK(g2["pool_version"] == 2);
  CHECK(claim_json(db, "u5", "b5", 1, {"--prize", "pa"})["reason"] == "not_found");
  CHECK(db.count("SELECT count(*) FROM grants g JOIN prize p ON p.id = g.prize_id WHERE p.code = 'pa'") == 3);
  CHECK(db.count("SELECT count(*) FROM grants g JOIN prize p ON p.id = g.prize_id WHERE "
                 "(p.code = 'pa' AND g.pool_version <> 1) OR (p.code = 'pb' AND g.pool_version <> 2)") == 0);
  // the kept prize: the same row, its live stock (50 + 10, one claimed) and its 3 buckets
  CHECK(db.count("SELECT id FROM prize WHERE code = 'pk'") == pk_id);
  CHECK(db.count("SELECT stock_total FROM prize WHERE code = 'pk'") == 60);
  CHECK(db.count("SELECT SUM(remain) FROM stock WHERE prize_id = $1", {pk_id}) == 59);
  CHECK(db.count("SELECT count(*) FROM stock WHERE prize_id = $1", {pk_id}) == 3);
  CHECK(db.count("SELECT amount FROM prize WHERE code = 'pk'") == 2);
  // the retired prize keeps its stock accounted; the new one has the file's
  CHECK(db.count("SELECT retired FROM prize WHERE code = 'pa'") == 1);
  CHECK(db.count("SELECT SUM(s.remain) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.code = 'pa'") == 97);
  CHECK(db.count("SELECT SUM(s.remain) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.code = 'pb'") == 29);
  auto show = json::parse(db.ok({"activity", "show", "act", "-o", "json"}).out);
  CHECK(show["version"] == 2);

  // history: both versions with who proposed and approved
  std::vector<json> versions;
  for (auto& l : lines(db.ok({"activity", "history", "act", "-o", "json"}).out)) {
    auto j = json::parse(l);
    if (j["type"] == "version") versions.push_back(j);
  }
  REQUIRE(versions.size() == 2);
  CHECK(versions[0]["state"] == "superseded");
  CHECK(versions[1]["state"] == "current");
  CHECK(versions[1]["proposed_by"] == "dave");
  CHECK(versions[1]["product_by"] == "bob");
  CHECK(versions[1]["tech_by"] == "carol");
  CHECK(versions[1]["hash"] == up["definition_hash"]);
  CHECK(!versions[1]["switched_at"].is_null());
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'activity.version.switch'") == 1);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'activity_version' AND to_state = 'superseded'") == 1);
  // diff between old versions still works
  auto d12 = last_json(db.ok({"activity", "diff", "act", "--from", "1", "--to", "2", "-o", "json"}));
  CHECK(d12["from"]["state"] == "superseded");
}

TEST_CASE("version: a switch while 16 workers claim - every grant follows and records exactly one version") {
  TestDb db;
  db.migrate();
  seed(db, version_spec("pa", 5000, 10));
  auto f = write_file(db.dir(), "v2.toml", definition(version_spec("pb", 5000, 10)));
  db.ok({"activity", "update", "-f", f, "--operator", "dave"});
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});

  constexpr int kWorkers = 16, kClaims = 60;
  std::atomic<int> granted{0}, other{0}, started{0};
  std::atomic<bool> switched{false};
  std::vector<std::thread> ts;
  for (int w = 0; w < kWorkers; ++w)
    ts.emplace_back([&, w] {
      auto b = engine(db);
      ++started;
      for (int i = 0; i < kClaims; ++i) {
        std::string id = std::to_string(w) + "_" + std::to_string(i);
        auto o = claim(*b.engine, "act", "u" + id, "b" + id);
        if (o.status == Status::granted && o.grant && o.grant->pool_version &&
            (o.grant->prize == "pa") == (*o.grant->pool_version == 1))
          ++granted;
        else
          ++other;
        // keep claiming for a while after the switch so that both versions see traffic
        if (i == kClaims / 2)
          while (!switched) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  while (db.count("SELECT count(*) FROM grants") < kWorkers * 5) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
  switched = true;
  for (auto& t : ts) t.join();

  CHECK(granted == kWorkers * kClaims);
  CHECK(other == 0);
  CHECK(db.count("SELECT count(*) FROM grants") == kWorkers * kClaims);
  // per grant: the prize and the version agree (pa only under 1, pb only under 2)
  CHECK(db.count("SELECT count(*) FROM grants g JOIN prize p ON p.id = g.prize_id WHERE NOT "
                 "((p.code = 'pa' AND g.pool_version = 1) OR (p.code = 'pb' AND g.pool_version = 2))") == 0);
  const int64_t pa = db.count("SELECT count(*) FROM grants WHERE pool_version = 1");
  const int64_t pb = db.count("SELECT count(*) FROM grants WHERE pool_version = 2");
  CHECK(pa >= kWorkers * 5);
  CHECK(pb >= kWorkers * (kClaims / 2 - 1));
  CHECK(pa + pb == kWorkers * kClaims);
  // no grant of version 1 was written after the first one of version 2: the switch is one point
  CHECK(db.count("SELECT count(*) FROM grants a WHERE a.pool_version = 1 AND a.id > (SELECT min(id) FROM grants WHERE "
                 "pool_version = 2)") == 0);
  // exact stock: every unit either remains or is held by a grant of its prize
  CHECK(db.count("SELECT SUM(s.remain) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.code = 'pa'") == 5000 - pa);
  CHECK(db.count("SELECT SUM(s.remain) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.code = 'pb'") == 5000 - pb);
  CHECK(db.count("SELECT count(*) FROM stock WHERE remain < 0") == 0);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == kWorkers * kClaims);
}

TEST_CASE("version: bad input is refused with its exit code and nothing written") {
  TestDb db;
  db.migrate();
  Spec s = version_spec("pa", 100, 50);
  s.budget = 100000;
  seed(db, s);
  const int64_t before = footprint(db);
  auto write = [&](const std::string& name, const std::string& text) { return write_file(db.dir(), name, text); };
  // diff without a version in review, of an unknown activity, of unknown versions, backwards
  db.ok({"activity", "diff", "act"}, 67);
  db.ok({"activity", "diff", "nope"}, 67);
  db.ok({"activity", "diff", "act", "--to", "9"}, 67);
  db.ok({"activity", "diff", "act", "--from", "0", "--to", "1"}, 64);
  db.ok({"activity", "diff", "act", "--from", "x"}, 64);
  // update: a missing file, a file that does not lint, another kind, a removed budget
  db.ok({"activity", "update", "-f", db.dir() + "/missing.toml", "--operator", "dave"}, 66);
  db.ok({"activity", "update", "-f", write("bad.toml", "code = \"act\"\nkind = 3\n"), "--operator", "dave"}, 65);
  std::string lottery = std::regex_replace(definition(s), std::regex("kind = \"direct\""), "kind = \"lottery\"");
  lottery = std::regex_replace(lottery, std::regex("\namount = "), "\nweight = 1\namount = ") +
            "[lottery]\nconsolation = \"pk\"\n";
  auto kind = db.ok({"activity", "update", "-f", write("kind.toml", lottery), "--operator", "dave"}, 65);
  CHECK(kind.err.find("cannot make it") != std::string::npos);
  Spec nobudget = version_spec("pb", 100, 50);
  auto nb = db.ok({"activity", "update", "-f", write("nb.toml", definition(nobudget)), "--operator", "dave"}, 65);
  CHECK(nb.err.find("budget cannot be removed") != std::string::npos);
  // the same definition: nothing to do
  db.ok({"activity", "update", "-f", write("same.toml", definition(s)), "--operator", "dave"});
  // --publish skips the review: only with review.required = false
  Spec v2 = version_spec("pb", 100, 50);
  v2.budget = 100000;
  auto f2 = write("v2.toml", definition(v2));
  db.ok({"activity", "update", "-f", f2, "--operator", "dave", "--publish"}, 77);
  // approve / reject with no version in review
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"}, 1);
  db.ok({"activity", "reject", "act", "--as", "product", "--operator", "bob", "--reason", "x"}, 1);
  CHECK(footprint(db) == before);

  // one version in review at a time; diff --from after --to
  db.ok({"activity", "update", "-f", f2, "--operator", "dave"});
  const int64_t proposed = footprint(db);
  Spec v3 = v2;
  v3.extra += "[[fuse]]\nname = \"burst\"\nwindow_seconds = 60\nmax_count = 1000\n";
  auto busy = db.ok({"activity", "update", "-f", write("v3.toml", definition(v3)), "--operator", "erin"}, 1);
  CHECK(busy.err.find("already in review") != std::string::npos);
  db.ok({"activity", "diff", "act", "--from", "2", "--to", "1"}, 64);
  CHECK(footprint(db) == proposed);
  // a rejected version leaves N running; the next proposal is version 3
  db.ok({"activity", "reject", "act", "--as", "product", "--operator", "bob", "--reason", "wrong prize"});
  CHECK(db.count("SELECT count(*) FROM activity_version WHERE version = 2 AND state = 'rejected'") == 1);
  auto up3 = last_json(db.ok({"activity", "update", "-f", write("v3.toml", definition(v3)), "--operator", "erin", "-o", "json"}));
  CHECK(up3["version"] == 3);
  auto d = last_json(db.ok({"activity", "diff", "act", "-o", "json"}));
  CHECK(d["from"]["version"] == 1);
  CHECK(d["to"]["version"] == 3);
  bool fuse_added = false;
  for (auto& c : d["changes"]) fuse_added |= c["section"] == "fuse" && c["key"] == "burst" && c["change"] == "added";
  CHECK(fuse_added);
}

TEST_CASE("version: with review.required = false, update --publish switches at once") {
  TestDb db;
  db.migrate();
  seed(db, version_spec("pa", 10, 5));
  claim_json(db, "u1", "b1");
  auto f = write_file(db.dir(), "v2.toml", definition(version_spec("pb", 10, 5)));
  auto r = last_json(db.ok({"activity", "update", "-f", f, "--publish", "--operator", "dave", "-o", "json"}, 0,
                           {{"REWARDCTL_REVIEW_REQUIRED", "false"}}));
  CHECK(r["version"] == 2);
  CHECK(r["version_state"] == "current");
  CHECK(db.count("SELECT count(*) FROM audit WHERE action = 'activity.review_waived'") == 2);  // create + update
  auto g = claim_json(db, "u2", "b2");
  CHECK(g["prize"] == "pb");
  CHECK(g["pool_version"] == 2);
}
