// [db] read_url: read-only commands - report, record show, ledger, reconcile's checks - read a hot
// standby of the database (streaming replication from the test server, scripts/pgreplica.sh) while
// claims continue on the primary; reconcile records its run on the primary. Replay paused on the
// standby proves the reads are the standby's: what the primary committed since is not seen, and a
// reconcile of that older snapshot is still clean. Bad settings are refused with 78 before anything.
#include <doctest/doctest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

// Pauses WAL replay on the standby for the scope (the primary goes on; the standby shows the
// state it had when paused).
struct ReplayPaused {
  std::unique_ptr<rc::store::Store> standby;
  explicit ReplayPaused(const TestDb& db)
      : standby(rc::store::open_store(rc::store::parse_dsn(db.replica_url(), "test"), store_options())) {
    standby->autocommit().query("SELECT pg_wal_replay_pause()", {});
  }
  ~ReplayPaused() {
    try {
      standby->autocommit().query("SELECT pg_wal_replay_resume()", {});
    } catch (...) {
    }
  }
};

}  // namespace

TEST_CASE("read_url: report, record show, ledger and reconcile read the hot standby while claims go on on the primary") {
  if (!is_pg() || is_pooled()) {
    MESSAGE("PostgreSQL only, direct: the hot standby is the test server's");
    return;
  }
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 100000;
  seed(db, s);
  for (int i = 0; i < 5; ++i) db.ok({"claim", "act", "--user", "u" + std::to_string(i), "--biz-id", "b" + std::to_string(i)});
  db.wait_for_replica();
  const std::map<std::string, std::string> standby{{"REWARDCTL_DB_READ_URL", db.replica_url()}};

  // claims go on on the primary while the standby is read
  std::atomic<bool> stop{false};
  std::atomic<int> claimed{0};
  std::thread claimer([&] {
    for (int i = 0; !stop && i < 200; ++i)
      if (db.rc({"claim", "act", "--user", "c" + std::to_string(i), "--biz-id", "c" + std::to_string(i)}).rc == 0)
        ++claimed;
  });

  auto shown = db.ok({"record", "show", "--user", "u1", "-o", "json"}, 0, standby);
  CHECK(shown.err.find("reading from the standby") != std::string::npos);
  auto rows = lines(shown.out);
  REQUIRE(rows.size() == 1);
  CHECK(json::parse(rows[0])["biz_id"] == "b1");
  auto bal = json::parse(lines(db.ok({"ledger", "balance", "u1", "-o", "json"}, 0, standby).out).at(0));
  CHECK(bal["balance"] == 1);
  auto rep = last_json(db.ok({"report", "act", "-o", "json"}, 0, standby));
  CHECK(rep["granted"].get<int64_t>() >= 5);
  auto rec = db.ok({"reconcile", "-o", "json"}, 0, standby);
  CHECK(rec.err.find("reading from the standby") != std::string::npos);
  CHECK(last_json(rec)["state"] == "clean");
  stop = true;
  claimer.join();
  CHECK(claimed > 0);
  // the run is recorded on the primary (a standby takes no writes)
  CHECK(db.count("SELECT count(*) FROM reconcile_run WHERE state = 'clean'") == 1);

  SUBCASE("with replay paused, the standby shows its older state, and its snapshot still reconciles clean") {
    ReplayPaused paused(db);
    db.ok({"claim", "act", "--user", "late", "--biz-id", "late"});
    CHECK(db.count("SELECT count(*) FROM grants WHERE user_id = 'late'") == 1);
    auto r = db.ok({"record", "show", "--user", "late", "-o", "json"}, 0, standby);
    CHECK(lines(r.out).empty());  // not replayed yet
    CHECK(db.ok({"record", "show", "--user", "late", "-o", "json"}).out.find("\"late\"") != std::string::npos);
    auto paused_rec = db.ok({"reconcile", "-o", "json"}, 0, standby);
    CHECK(last_json(paused_rec)["state"] == "clean");
    auto status = last_json(db.ok({"db", "status", "-o", "json"}, 0, standby));
    CHECK(status["read_url"]["standby"] == true);
    CHECK(status["read_url"]["replay_lag_ms"].is_number_integer());
    CHECK(status["read_url"]["replay_paused"] == true);
  }
  SUBCASE("a standby of another schema is refused (78): its books are not this database's") {
    TestDb other;
    other.migrate();
    seed(other, Spec{});
    other.wait_for_replica();
    auto r = db.rc({"reconcile", "-o", "json"}, {{"REWARDCTL_DB_READ_URL", other.replica_url()}});
    INFO(r.all());
    CHECK(r.rc == 78);
    CHECK(r.err.find("db.read_url is not a copy of db.url") != std::string::npos);
    CHECK(r.err.find("schema") != std::string::npos);
    CHECK(db.rc({"report", "act"}, {{"REWARDCTL_DB_READ_URL", other.replica_url()}}).rc == 78);
  }
  SUBCASE("caught up, the standby's lag does not grow with the time since the primary last wrote") {
    // (0 when everything received is replayed; the test server is shared, so other tests' writes may
    // be in flight: then the lag is that of their last replayed commit, well under the wait)
    db.wait_for_replica();
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    auto status = last_json(db.ok({"db", "status", "-o", "json"}, 0, standby));
    CHECK(status["read_url"]["replay_lag_ms"].get<int64_t>() < 3000);
    CHECK(status["read_url"]["replay_paused"] == false);
  }
}

TEST_CASE("read_url: a SQLite read_url, or a read_url beside a SQLite database, is refused with 78 and nothing is read") {
  TestDb db;
  db.migrate();
  write_file(db.dir(), "bad.toml", "[db]\nread_url = \"sqlite:/tmp/x.db\"\n");
  auto r = db.rc({"--config", db.dir() + "/bad.toml", "report", "act"});
  INFO(r.all());
  CHECK(r.rc == 78);
  CHECK(r.err.find("db.read_url must name a PostgreSQL hot standby") != std::string::npos);
  CHECK(r.err.find("bad.toml") != std::string::npos);
  if (!is_pg()) {
    auto r2 = db.rc({"ledger", "balance", "u1"}, {{"REWARDCTL_DB_READ_URL", "host=127.0.0.1 port=1 dbname=x"}});
    INFO(r2.all());
    CHECK(r2.rc == 78);
    CHECK(r2.err.find("REWARDCTL_DB_READ_URL") != std::string::npos);
    CHECK(r2.err.find("must be PostgreSQL too") != std::string::npos);
  }
}
