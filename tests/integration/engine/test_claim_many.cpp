// Engine::claim_many (list-issue's chunks): the hot rows - budget and stock - are taken once per
// chunk, just before its commit, so that concurrent workers do not hold them for a whole chunk; a
// chunk they do not cover runs again taking as it goes. Either way every request gets the answer
// claim() gives it, and stock, buckets and budget match the grants exactly.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "core/engine/stock.hpp"
#include "support/fault_store.hpp"
#include "support/seed.hpp"

using namespace rt;
using rc::engine::Status;

namespace {

std::vector<rc::engine::ClaimOutcome> chunk(EngineBox& b, const std::string& prefix, int n) {
  std::vector<rc::engine::ClaimRequest> rs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    rs[size_t(i)].activity = "act";
    rs[size_t(i)].user = prefix + std::to_string(i);
    rs[size_t(i)].biz_id = "biz:" + rs[size_t(i)].user;
  }
  std::vector<rc::engine::ClaimOutcome> outs;
  b.store->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) { outs = b.engine->claim_many(tx, rs); });
  return outs;
}

// Every bucket gave exactly the grants recorded on it.
void check_buckets(const TestDb& db) {
  CHECK(db.count("SELECT count(*) FROM stock s WHERE s.total - s.remain <> (SELECT count(*) FROM grants g WHERE "
                 "g.prize_id = s.prize_id AND g.bucket = s.bucket)") == 0);
}

}  // namespace

TEST_CASE("claim_many: a chunk its stock and budget cover takes them once, at its end, bucket by bucket") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 100;
  s.buckets = 4;
  s.budget = 100'000;
  seed(db, s);
  // the engine's statements, seen through a store that only counts; the full flow's chunk (on
  // PostgreSQL a covered chunk is otherwise one statement: test_claim_one.cpp, "claim chunk")
  rc::engine::EngineOptions full;
  full.one_statement_claims = false;
  auto f = faulty(db, 0, full);
  EngineBox& b = f.box;
  const FaultStore& seen = *f.fs;
  auto outs = chunk(b, "u", 40);
  // one budget update and one per bucket, all after the chunk's last grant: the rows stay unlocked
  // until the chunk's end
  size_t last_grant = 0, first_hot = seen.log().size(), budget_updates = 0, stock_updates = 0;
  for (size_t i = 0; i < seen.log().size(); ++i) {
    const std::string& q = seen.log()[i];
    if (q.find("INSERT INTO grants") != std::string::npos) last_grant = i;
    const bool budget = q.rfind("UPDATE budget", 0) == 0, stock = q.rfind("UPDATE stock", 0) == 0;
    budget_updates += budget;
    stock_updates += stock;
    if ((budget || stock) && i < first_hot) first_hot = i;
  }
  CHECK(budget_updates == 1);
  CHECK(stock_updates == 4);
  CHECK(first_hot > last_grant);
  for (auto& o : outs) CHECK(o.status == Status::granted);
  for (auto& o : outs) CHECK(o.grant->state == rc::GrantState::success);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 60);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 4000);
  // the users' own buckets: every bucket was used by someone, none emptied
  CHECK(db.count("SELECT count(DISTINCT bucket) FROM grants") == 4);
  check_buckets(db);
}

TEST_CASE("claim_many: a chunk the budget does not cover answers each request as claim() would") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 100;
  s.budget = 500;  // 5 grants of 100 cents
  seed(db, s);
  auto b = engine(db);
  auto outs = chunk(b, "u", 8);
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(outs[size_t(i)].status == (i < 5 ? Status::granted : Status::rejected));
    if (i >= 5) CHECK(outs[size_t(i)].reason == rc::engine::Reason::budget_exhausted);
  }
  CHECK(db.count("SELECT consumed_cents FROM budget") == 500);
  CHECK(db.count("SELECT count(*) FROM grants") == 5);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 95);
  check_buckets(db);
}

TEST_CASE("claim_many: a chunk past the stock of a user's bucket moves on to other buckets, then sold_out") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 6;
  s.buckets = 3;  // 2 units per bucket: 8 users cannot all get their own bucket
  seed(db, s);
  auto b = engine(db);
  auto outs = chunk(b, "u", 8);
  int granted = 0;
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    if (i < 6) CHECK(outs[size_t(i)].status == Status::granted);
    else CHECK(outs[size_t(i)].reason == rc::engine::Reason::sold_out);
    granted += outs[size_t(i)].status == Status::granted;
  }
  CHECK(granted == 6);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 0);
  check_buckets(db);
}

TEST_CASE("claim_many: concurrent chunks of one prize never oversell, and the counts match exactly") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 130;
  s.buckets = 2;
  s.budget = 12'000;  // 120 grants: the budget runs out before the stock
  seed(db, s);
  std::atomic<int> granted{0}, budget_out{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < 4; ++w)
    ts.emplace_back([&, w] {
      auto b = engine(db);
      for (int c = 0; c < 3; ++c)
        for (auto& o : chunk(b, "w" + std::to_string(w) + "c" + std::to_string(c) + "_", 20)) {
          if (o.status == Status::granted) ++granted;
          else if (o.reason == rc::engine::Reason::budget_exhausted) ++budget_out;
        }
    });
  for (auto& t : ts) t.join();
  CHECK(granted == 120);
  CHECK(budget_out == 120);
  CHECK(db.count("SELECT count(*) FROM grants") == 120);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 12'000);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 10);
  check_buckets(db);
}

namespace {

// 8 threads, each one chunk of 50 users, against 8 buckets of 20 units (and the budget, if any).
void crosswise_chunks(std::optional<int64_t> budget) {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 160;
  s.buckets = 8;
  s.budget = budget;  // 100 cents a grant
  seed(db, s);
  const int64_t fits = budget ? *budget / 100 : 160;
  auto users_of = [](int w, int64_t first, int64_t second) {
    std::vector<std::string> out;
    for (int64_t want : {first, second}) {
      int n = 0;
      for (int i = 0; n < 25; ++i) {
        std::string u = "w" + std::to_string(w) + "b" + std::to_string(want) + "_" + std::to_string(i);
        if (rc::engine::preferred_bucket(u, 8) == want) {
          out.push_back(u);
          ++n;
        }
      }
    }
    return out;
  };
  std::atomic<int> granted{0}, refused{0};
  std::atomic<int64_t> retries{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < 8; ++w)
    ts.emplace_back([&, w] {
      const int64_t a = (w / 2) * 2, z = a + 1;
      auto users = w % 2 ? users_of(w, z, a) : users_of(w, a, z);
      std::vector<rc::engine::ClaimRequest> rs(users.size());
      for (size_t i = 0; i < users.size(); ++i) {
        rs[i].activity = "act";
        rs[i].user = users[i];
        rs[i].biz_id = "biz:" + users[i];
      }
      auto b = engine(db);
      std::vector<rc::engine::ClaimOutcome> outs;
      b.store->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) { outs = b.engine->claim_many(tx, rs); });
      for (auto& o : outs) {
        if (o.status == Status::granted) ++granted;
        else if (o.reason == (budget ? rc::engine::Reason::budget_exhausted : rc::engine::Reason::sold_out)) ++refused;
      }
      retries += b.store->retries_used();
    });
  for (auto& t : ts) t.join();
  CHECK(granted == fits);
  CHECK(refused == 8 * 50 - fits);
  CHECK(db.count("SELECT count(*) FROM grants") == fits);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 160 - fits);
  check_buckets(db);
  // PostgreSQL: no transaction had to be retried (a deadlock aborts one; SQLite waits its turn)
  if (is_pg()) CHECK(retries.load() == 0);
}

}  // namespace

// No budget row to queue on; 8 buckets of 20 units. Each chunk has 25 users whose own bucket is
// one of a pair and then 25 whose own bucket is the other, and its twin chunk the other way round:
// neither fits its buckets, so both run again taking as they go. Before such chunks locked their
// buckets in order, the two took the pair crosswise and PostgreSQL broke the deadlock by aborting
// one (40P01): retried, and with enough workers (3 list-issue processes x 4) the retries ran out.
TEST_CASE("claim_many: concurrent chunks that their buckets do not cover never deadlock each other") {
  crosswise_chunks(std::nullopt);
}

// With a budget, each request locks the budget row before its bucket: such chunks queue on it.
TEST_CASE("claim_many: concurrent chunks that their buckets and budget do not cover never deadlock each other") {
  crosswise_chunks(10'000);
}

TEST_CASE("claim_many: after a chunk the budget did not cover, the next chunk runs once, taking as it goes") {
  // Each chunk past the budget used to run all its requests (grant rows, deliveries) and roll them
  // back before running them again: the budget_exhausted tail of a batch took 1.7 x as long.
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 100;
  s.budget = 500;  // 5 grants of 100 cents
  seed(db, s);
  rc::engine::EngineOptions o;
  o.sold_out_memory_ms = 600'000;  // the memory outlasts the test however slow the machine
  o.one_statement_claims = false;  // the full flow's chunks (the statements are counted)
  auto f = faulty(db, 0, o);
  EngineBox& b = f.box;
  const FaultStore& seen = *f.fs;
  auto grant_inserts = [&](size_t from) {
    size_t n = 0;
    for (size_t i = from; i < seen.log().size(); ++i) n += seen.log()[i].find("INSERT INTO grants") != std::string::npos;
    return n;
  };
  // the first chunk does not fit: its 8 requests run twice
  auto outs = chunk(b, "u", 8);
  CHECK(grant_inserts(0) == 16);
  for (int i = 0; i < 8; ++i) CHECK(outs[size_t(i)].status == (i < 5 ? Status::granted : Status::rejected));
  // the next one takes as it goes at once: each request runs once, with claim()'s answer
  const size_t mark = seen.log().size();
  outs = chunk(b, "v", 8);
  CHECK(grant_inserts(mark) == 8);
  for (auto& x : outs) CHECK(x.reason == rc::engine::Reason::budget_exhausted);
  CHECK(db.count("SELECT count(*) FROM grants") == 5);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 500);
  check_buckets(db);
}
