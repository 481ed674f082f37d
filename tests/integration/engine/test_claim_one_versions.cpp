// The one-statement claim with the rules cached in long-lived engines (core/engine/claim_one.hpp):
// across definition version switches it follows each version as the full flow does (written by the
// hostile review of the one-statement claim), and engines of both paths at once on one hot prize
// keep the budget, stock and limits exact.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "core/engine/grant_view.hpp"
#include "support/seed.hpp"

using namespace rt;

namespace {
const rc::Millis kNow = 1'800'000'000'000;
rc::engine::ClaimRequest req(const std::string& user, const std::string& biz, std::optional<std::string> prize = {}) {
  rc::engine::ClaimRequest r;
  r.activity = "act";
  r.user = user;
  r.biz_id = biz;
  r.deliver = true;
  r.prize = prize;
  return r;
}
std::string brief(const rc::engine::ClaimOutcome& o) {
  std::string s = rc::engine::status_name(o.status);
  if (o.reason != rc::engine::Reason::none) s += std::string("/") + rc::name(o.reason);
  if (o.grant)
    s += "|" + o.grant->prize + "|" + std::to_string(o.grant->cost_cents) + "|v" +
         std::to_string(o.grant->pool_version.value_or(-1)) + "|" + rc::name(o.grant->state) + "|" + o.grant->channel;
  return s;
}
void publish(const TestDb& db, Spec s) {
  std::string f = write_file(db.dir(), "v.toml", definition(s));
  auto r = db.rc({"activity", "update", "-f", f, "--publish", "--operator", "alice"},
                 {{"REWARDCTL_REVIEW_REQUIRED", "false"}});
  INFO(r.all());
  REQUIRE(r.rc == 0);
}
}  // namespace

TEST_CASE("claim one: a long-lived engine follows version switches like the full flow") {
  TestDb db;
  db.migrate();
  Spec s;
  s.budget = 1'000'000;
  s.limit = 10;
  s.period = "day";
  seed(db, s);
  rc::engine::EngineOptions full;
  full.one_statement_claims = false;
  auto one = engine(db, kNow);
  auto ref = engine(db, kNow, full);
  CHECK(brief(one.engine->claim(req("a", "a1"))) == brief(ref.engine->claim(req("b", "b1"))));
  // v2: p1 retired, p2 at another cost
  Spec v2 = s;
  v2.unit_cost = 300;
  v2.custom_prizes = true;
  v2.extra = "[[prizes]]\ncode = \"p2\"\nitem = \"thing\"\namount = 1\nstock = 50\n";
  publish(db, v2);
  auto a = one.engine->claim(req("a", "a2")), b = ref.engine->claim(req("b", "b2"));
  CHECK(brief(a) == brief(b));
  CHECK(brief(a) == "granted|p2|300|v2|success|ledger");
  // --prize naming the retired prize
  CHECK(brief(one.engine->claim(req("a", "a3", "p1"))) == brief(ref.engine->claim(req("b", "b3", "p1"))));
  // v3: the item moves to the outbox: the cached engine must not credit the ledger
  Spec v3 = v2;
  v3.channel = "outbox";
  publish(db, v3);
  a = one.engine->claim(req("a", "a4"));
  b = ref.engine->claim(req("b", "b4"));
  CHECK(brief(a) == brief(b));
  CHECK(brief(a) == "granted|p2|300|v3|awaiting_external|outbox");
}

TEST_CASE("claim one: threads on long-lived engines while the version switches: every grant follows its version") {
  TestDb db;
  db.migrate();
  Spec s;
  s.budget = 100'000'000;
  s.stock = 100000;
  s.buckets = 4;
  seed(db, s);
  std::atomic<bool> stop{false};
  std::atomic<int> granted{0}, other{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      auto e = engine(db);  // system clock, its own connection, its own rules cache
      for (int i = 0; !stop; ++i) {
        auto o = e.engine->claim(req("u" + std::to_string(t) + "-" + std::to_string(i % 50), std::to_string(t) + "-" + std::to_string(i)));
        if (o.status == rc::engine::Status::granted) ++granted;
        else ++other;
      }
    });
  const int64_t costs[] = {100, 300, 700, 1100};
  for (int v = 2; v <= 4; ++v) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    Spec n = s;
    n.unit_cost = costs[v - 1];
    n.custom_prizes = true;
    n.extra = "[[prizes]]\ncode = \"p" + std::to_string(v) + "\"\nitem = \"thing\"\namount = 1\nstock = 100000\nstock_buckets = 4\n";
    publish(db, n);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  stop = true;
  for (auto& t : ts) t.join();
  MESSAGE("granted " << granted.load() << ", other " << other.load());
  CHECK(other == 0);
  CHECK(granted > 20);
  // each grant: the prize and cost of its version
  CHECK(db.count("SELECT count(*) FROM grants g JOIN prize p ON p.id = g.prize_id WHERE NOT ("
                 "(g.pool_version = 1 AND p.code = 'p1' AND g.cost_cents = 100) OR (g.pool_version = 2 AND p.code = 'p2' AND g.cost_cents = 300) OR "
                 "(g.pool_version = 3 AND p.code = 'p3' AND g.cost_cents = 700) OR (g.pool_version = 4 AND p.code = 'p4' AND g.cost_cents = 1100))") == 0);
  for (int v = 2; v <= 4; ++v) {
    CAPTURE(v);
    CHECK(db.count("SELECT count(*) FROM grants WHERE pool_version = $1", {int64_t(v)}) > 0);
    // no grant of an older version logged after the switch to v logged its versions' move
    CHECK(db.count("SELECT count(*) FROM status_log l JOIN grants g ON g.id = l.entity_id AND l.entity = 'grant' "
                   "WHERE g.pool_version < $1 AND l.id > (SELECT min(id) FROM status_log WHERE entity = 'activity_version' "
                   "AND reason = 'switched to version ' || $1)", {int64_t(v)}) == 0);
  }
  CHECK(db.count("SELECT count(*) FROM grants WHERE state <> 'success'") == 0);
}

TEST_CASE("claim one: fast and full-flow engines at once on one hot prize, the budget binding exactly") {
  TestDb db;
  db.migrate();
  Spec s;
  s.budget = 3500;  // 35 grants of 100 cents
  s.stock = 37;
  s.buckets = 4;
  s.limit = 2;
  s.period = "day";
  seed(db, s);
  std::atomic<int> granted{0}, budget{0}, sold{0}, limited{0}, replayed{0}, other{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&, t] {
      rc::engine::EngineOptions o;
      o.one_statement_claims = t % 2 == 0;
      auto e = engine(db, kNow, o);
      for (int i = 0; i < 40; ++i) {
        // every biz id is claimed by two threads (one fast, one full): twins across the paths
        const int k = (t / 2) * 40 + i;
        auto r = e.engine->claim(req("u" + std::to_string(k % 20), "k" + std::to_string(k)));
        if (r.status == rc::engine::Status::granted) ++granted;
        else if (r.status == rc::engine::Status::replayed) ++replayed;
        else if (r.reason == rc::engine::Reason::budget_exhausted) ++budget;
        else if (r.reason == rc::engine::Reason::sold_out) ++sold;
        else if (r.reason == rc::engine::Reason::limit_reached) ++limited;
        else ++other;
      }
    });
  for (auto& t : ts) t.join();
  MESSAGE("granted " << granted.load() << " replayed " << replayed.load() << " budget " << budget.load() << " sold "
                     << sold.load() << " limited " << limited.load() << " other " << other.load());
  CHECK(other == 0);
  CHECK(granted == 35);
  CHECK(db.count("SELECT count(*) FROM grants") == 35);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 3500);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 2);
  CHECK(db.count("SELECT sum(used) FROM limit_counter") == 35);
  CHECK(db.count("SELECT count(*) FROM (SELECT user_id FROM grants GROUP BY user_id HAVING count(*) > 2) x") == 0);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 35);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant'") == 70);
}
