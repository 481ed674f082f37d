// Transactions retry a bounded number of times on busy / lock-timeout errors, then fail with the
// database exit code (69) and write nothing.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "support/seed.hpp"

using namespace rt;

TEST_CASE("store: a write lock held elsewhere -> bounded retries, then exit 69 and nothing written") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  std::string cfg = write_file(db.dir(), "rewardctl.toml", "[db]\nbusy_timeout_ms = 100\nretries = 2\n");
  std::atomic<bool> locked{false}, release{false};
  std::thread holder([&] {
    auto st = db.open();
    st->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
      // SQLite: BEGIN IMMEDIATE already holds the write lock. PostgreSQL: lock the stock row.
      if (rt::is_pg()) tx.query("SELECT remain FROM stock FOR UPDATE");
      locked = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    });
  });
  while (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto r = db.rc({"--config", cfg, "claim", "act", "--user", "u1", "--biz-id", "b1"});
  release = true;
  holder.join();
  INFO(r.all());
  CHECK(r.rc == 69);
  CHECK(r.err.find("after 3 attempts") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
  CHECK(db.count("SELECT SUM(remain) FROM stock") == 100);
  // once the lock is gone the same claim goes through
  db.ok({"--config", cfg, "claim", "act", "--user", "u1", "--biz-id", "b1"});
}
