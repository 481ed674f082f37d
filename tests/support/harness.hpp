#pragma once
// Integration-test support: run the real rewardctl binary, and give each test a fresh database on
// the backend named by REWARDCTL_TEST_BACKEND (sqlite, or postgres against the server that
// scripts/dev test starts and names in REWARDCTL_TEST_PG).
#include <map>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/store/store.hpp"

namespace rt {

struct Run {
  int rc = -1;
  std::string out, err;
  std::string all() const { return out + err; }
};

// Runs rewardctl with args (and env additions) in cwd; stdin gets `input`. as_uid >= 0 (root only):
// the child runs as that user and group id, to meet files owned by someone else.
Run run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
        const std::string& input = "", const std::string& cwd = "", int as_uid = -1);

// Runs any program (argv[0] is a path or found on PATH) the same way: a shell, for the README tour
// and the completion scripts.
Run run_program(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                const std::string& input = "", const std::string& cwd = "");

// "sqlite", "postgres", or "pgbouncer" (PostgreSQL through a pooler in transaction mode:
// REWARDCTL_TEST_PGBOUNCER names it, every rewardctl run gets REWARDCTL_DB_POOLER=transaction)
std::string backend();
bool is_pg();      // postgres or pgbouncer
bool is_pooled();  // pgbouncer
// The store options of a direct connection the test opens (pooled through the pooler).
rc::store::StoreOptions store_options();

// A fresh, empty database for one test: a file in a temporary directory (SQLite), a schema of its
// own on the test server (PostgreSQL), or a database of its own reached through the pooler
// (pgbouncer). Removed at the end of the test.
//
// The oracle: when the test leaves grants, qualifications, ledger entries or resend bills behind
// (it issued, reversed, imported, expired or resent), reconcile runs over the database at the end
// of the test and every difference it finds fails the test. Every check runs except `stuck`, which
// is about the clock, not the books. A test that damages the books on purpose calls expect_damage().
class TestDb {
 public:
  TestDb();
  ~TestDb();
  void expect_damage() { oracle_ = false; }
  // Runs the oracle now: fails the test (naming each difference) when reconcile finds any.
  void check_books() const;
  const std::string& url() const { return url_; }
  const std::string& dir() const { return dir_; }
  // rewardctl --db URL args...
  Run rc(std::vector<std::string> args, const std::map<std::string, std::string>& env = {},
         const std::string& input = "") const;
  // rc as another user (see run's as_uid)
  Run rc_as(int uid, std::vector<std::string> args) const;
  // rc + fail the test unless the exit code is `expect`
  Run ok(std::vector<std::string> args, int expect = 0, const std::map<std::string, std::string>& env = {},
         const std::string& input = "") const;
  // A direct connection for checking what the database holds.
  std::unique_ptr<rc::store::Store> open() const;
  int64_t count(const std::string& sql, const rc::store::Params& p = {}) const;
  // PostgreSQL (direct): this database on the test server's hot standby (REWARDCTL_TEST_PG_REPLICA,
  // started by scripts/dev test with scripts/pgreplica.sh; the test fails when it is not set).
  std::string replica_url() const;
  // Waits until the standby has replayed everything the primary has written so far.
  void wait_for_replica() const;
  void migrate() const;

 private:
  std::string url_, dir_, schema_, database_;
  bool oracle_ = true;
};

std::string write_file(const std::string& dir, const std::string& name, const std::string& content);
std::string read_file(const std::string& path);
std::string make_temp_dir();
// Every JSON line of a command's stdout.
std::vector<std::string> lines(const std::string& s);
// The last line of r's standard output, parsed as JSON (-o json prints one object per line).
// Fails the test when there is no line.
nlohmann::json last_json(const Run& r);

}  // namespace rt
