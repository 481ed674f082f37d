// The engine at its edges, on the backend under test: the window's last second, the budget at the
// top of int64, and the loser of two concurrent reversals.
#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <stdexcept>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;
using rc::parse_rfc3339;
using rc::engine::Status;

static rc::Millis at(const char* s) { return *parse_rfc3339(s); }

namespace {

// A Store that counts the statements its sessions run (and forwards everything).
class CountingTx : public rc::store::Tx {
 public:
  CountingTx(rc::store::Session& in, int64_t& n) : in_(in), n_(n) {}
  rc::store::Dialect dialect() const override { return in_.dialect(); }
  rc::store::Result query(const std::string& sql, const rc::store::Params& p) override {
    ++n_;
    return in_.query(sql, p);
  }
  void exec_script(const std::string& sql) override {
    ++n_;
    in_.exec_script(sql);
  }

 private:
  rc::store::Session& in_;
  int64_t& n_;
};

class CountingStore : public rc::store::Store {
 public:
  explicit CountingStore(std::unique_ptr<rc::store::Store> in) : Store(0), in_(std::move(in)) {}
  rc::store::Dialect dialect() const override { return in_->dialect(); }
  std::string describe() const override { return in_->describe(); }
  void transact(rc::store::TxMode mode, const std::function<void(rc::store::Tx&)>& fn) override {
    in_->transact(mode, [&](rc::store::Tx& tx) {
      CountingTx c(tx, statements);
      fn(c);
      if (c.rollback_requested()) tx.rollback_only();
    });
  }
  rc::store::Session& autocommit() override {
    if (!auto_) auto_ = std::make_unique<CountingTx>(in_->autocommit(), statements);
    return *auto_;
  }
  std::unique_ptr<rc::store::BulkWriter> bulk_writer(rc::store::Tx&, const std::string&,
                                                     const std::vector<std::string>&) override {
    throw std::logic_error("not used by claims");
  }
  int64_t statements = 0;

 private:
  std::unique_ptr<rc::store::Store> in_;
  std::unique_ptr<CountingTx> auto_;
};

}  // namespace

TEST_CASE("engine: a sold-out prize is known in a few statements, however many buckets it has") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 256;
  s.buckets = 256;  // one unit per bucket
  seed(db, s);
  {
    auto b = engine(db);
    for (int i = 0; i < 255; ++i)
      REQUIRE(claim(*b.engine, "act", "u" + std::to_string(i), "b" + std::to_string(i)).status == Status::granted);
  }
  CHECK(db.count("SELECT sum(remain) FROM stock") == 1);
  auto count_claim = [&](const std::string& user, const std::string& biz) {
    CountingStore st(db.open());
    rc::SystemClock clock;
    rc::engine::EngineOptions o;
    o.actor = "test";
    rc::engine::Engine e(st, clock, o);  // a fresh engine: no sold-out memory
    rc::engine::ClaimRequest r;
    r.activity = "act";
    r.user = user;
    r.biz_id = biz;
    r.deliver = false;  // the claim's own statements only
    auto out = e.claim(r);
    return std::make_pair(out, st.statements);
  };
  // the last unit, in whichever bucket it is, is found without trying the empty ones one by one
  auto last = count_claim("last", "last");
  INFO("statements for the last unit: " << last.second);
  CHECK(last.first.status == Status::granted);
  CHECK(last.second <= 16);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 0);
  auto sold = count_claim("late", "late");
  INFO("statements for sold out: " << sold.second);
  CHECK(sold.first.reason == rc::engine::Reason::sold_out);
  CHECK(sold.second <= 16);  // trying every bucket would be 256 statements
  CHECK(db.count("SELECT count(*) FROM grants") == 256);
}

TEST_CASE("engine: the end second of the window is inclusive (end 23:59:59+08:00 serves all of 23:59:59)") {
  TestDb db;
  db.migrate();
  Spec s;
  s.start = "2027-06-01T00:00:00+08:00";
  s.end = "2027-06-30T23:59:59+08:00";  // the style of every template and example
  seed(db, s);
  auto b = engine(db, at("2027-06-30T23:59:59.500+08:00"));
  CHECK(claim(*b.engine, "act", "u1", "b1").status == Status::granted);
  b = engine(db, at("2027-06-30T23:59:59.999+08:00"));
  CHECK(claim(*b.engine, "act", "u2", "b2").status == Status::granted);
  b = engine(db, at("2027-07-01T00:00:00+08:00"));
  CHECK(claim(*b.engine, "act", "u3", "b3").reason == rc::engine::Reason::ended);
  // the start second is inclusive too, and a moment before it is not
  b = engine(db, at("2027-05-31T23:59:59.999+08:00"));
  CHECK(claim(*b.engine, "act", "u4", "b4").reason == rc::engine::Reason::not_started);
  b = engine(db, at("2027-06-01T00:00:00+08:00"));
  CHECK(claim(*b.engine, "act", "u5", "b5").status == Status::granted);
  // the CLI, with the clock fixed at the last half second
  auto r = db.ok({"claim", "act", "--user", "u6", "--biz-id", "b6", "-o", "json"}, 0,
                 {{"REWARDCTL_NOW", "2027-06-30T15:59:59.500Z"}});
  CHECK(json::parse(r.out)["outcome"] == "granted");
  CHECK(db.count("SELECT count(*) FROM grants") == 4);
}

TEST_CASE("engine: a budget whose consumed + cost would pass 2^63-1 answers budget_exhausted on both backends") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 1;  // budget is checked before stock: the second claim meets the budget first
  s.unit_cost = 5'000'000'000'000'000'000;
  s.budget = 4'000'000'000'000'000'000;  // the most lint allows with this cost is 2^63-1 - 5e18
  seed(db, s);
  // an activity stored before lint refused such budgets (or edited by hand)
  db.open()->exec("UPDATE budget SET authorised_cents = 9223372036854775807");
  auto b = engine(db);
  auto first = claim(*b.engine, "act", "u1", "b1");
  CHECK(first.status == Status::granted);
  auto second = claim(*b.engine, "act", "u2", "b2");
  CHECK(second.status == Status::rejected);
  CHECK(second.reason == rc::engine::Reason::budget_exhausted);
  auto r = db.ok({"claim", "act", "--user", "u3", "--biz-id", "b3", "-o", "json"}, 1);
  CHECK(json::parse(r.out)["reason"] == "budget_exhausted");
  CHECK(db.count("SELECT consumed_cents FROM budget") == 5'000'000'000'000'000'000);
  CHECK(db.count("SELECT count(*) FROM grants") == 1);
}

TEST_CASE("engine: the loser of two concurrent reversals reports the state it lost to") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  auto g = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1", "-o", "json"});
  const std::string code = json::parse(g.out)["record_code"];
  std::string loser_out;
  int loser_rc = -1;
  if (is_pg()) {
    // Both read 'success'; the other reversal holds the row until the loser waits on it, then commits.
    // That winner is written by hand (its state change only, not the stock, ledger and log rows a
    // real reversal writes): the reconcile oracle would rightly see the difference.
    db.expect_damage();
    std::atomic<bool> locked{false}, go{false};
    std::thread other([&] {
      auto st = db.open();
      st->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
        tx.query("SELECT id FROM grants WHERE record_code = $1 FOR UPDATE", {code});
        locked = true;
        while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        tx.exec("UPDATE grants SET state = 'reversed' WHERE record_code = $1 AND state = 'success'", {code});
      });
    });
    while (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::thread release([&] {
      // the loser's conditional UPDATE is waiting for the row lock: let the winner commit
      auto st = db.open();
      for (int i = 0; i < 6000 && !go; ++i) {
        if (st->query("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE grants%'")[0]
                .i64(0) > 0)
          go = true;
        else std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      go = true;
    });
    auto r = db.rc({"reverse", code, "--reason", "refund", "--yes", "-o", "json"});
    release.join();
    other.join();
    loser_out = r.out;
    loser_rc = r.rc;
  } else {
    // SQLite serializes writers from BEGIN on: the second reversal reads the first one's result
    db.ok({"reverse", code, "--reason", "refund", "--yes"});
    auto r = db.rc({"reverse", code, "--reason", "refund", "--yes", "-o", "json"});
    loser_out = r.out;
    loser_rc = r.rc;
  }
  INFO(loser_out);
  CHECK(loser_rc == 1);
  auto j = json::parse(loser_out);
  CHECK(j["changed"] == false);
  CHECK(j["state"] == "reversed");
  CHECK(j["message"].get<std::string>().find("reversed") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM grants WHERE state = 'reversed'") == 1);
}

TEST_CASE("engine: a ledger credit that would take a balance past 2^63-1 credits nothing, inline or resent") {
  // Activities each credit 4e18 cents of cash to one user: the third would make 1.2e19. SQLite
  // used to store that sum as a floating-point number (the claim answered granted; `ledger balance`
  // and reconcile then failed on the account); PostgreSQL raised 22003. Now both refuse it as data.
  TestDb db;
  db.migrate();
  const int64_t big = 4'000'000'000'000'000'000;
  for (const char* code : {"a1", "a2", "a3", "a4"}) {
    Spec s;
    s.code = code;
    s.item_kind = "cash";
    s.unit_cost = 1;
    s.amount = big;
    s.stock = 1;
    s.budget = big;
    seed(db, s);
  }
  db.ok({"claim", "a1", "--user", "rich", "--biz-id", "h1"});
  db.ok({"claim", "a2", "--user", "rich", "--biz-id", "h2"});
  // delivered in the claim's transaction: the claim fails whole (exit 65), nothing written
  auto r = db.ok({"claim", "a3", "--user", "rich", "--biz-id", "h3"}, 65);
  CHECK(r.err.find("2^63-1") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM grants") == 2);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 2);
  CHECK(db.count("SELECT balance FROM ledger_account WHERE user_id = 'rich'") == 2 * big);
  db.ok({"ledger", "balance", "rich"});
  // a grant left in init (--no-deliver) and delivered later: the credit fails, the grant stays in init
  db.ok({"claim", "a4", "--user", "rich", "--biz-id", "h4", "--no-deliver"});
  auto b = engine(db);
  const int64_t id = db.count("SELECT id FROM grants WHERE biz_id = 'h4'");
  CHECK_THROWS_AS(b.engine->deliver(id), rc::Error);
  CHECK(db.count("SELECT count(*) FROM grants WHERE biz_id = 'h4' AND state = 'init'") == 1);
  CHECK(db.count("SELECT count(*) FROM ledger_entry") == 2);
  CHECK(db.count("SELECT balance FROM ledger_account WHERE user_id = 'rich'") == 2 * big);
}
