// db migrate / db status and the foundation's bad-input handling, on the backend under test.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sys/stat.h>

#include <thread>

#include "base/error.hpp"
#include "support/harness.hpp"

using nlohmann::json;
using rt::TestDb;

TEST_CASE("db: status while pending, migrate, migrate again, status when current") {
  TestDb db;
  auto st = db.ok({"db", "status", "-o", "json"}, 1);
  auto j = json::parse(st.out);
  CHECK(j["v"] == 1);
  CHECK(j["state"] == "pending");
  CHECK(j["current_version"] == 0);
  CHECK(j["pending"].size() >= 1);
  if (!rt::is_pg()) CHECK(j["exists"] == false);  // status never creates the file

  auto m1 = db.ok({"db", "migrate", "-o", "json"});
  auto a1 = json::parse(m1.out);
  CHECK(a1["applied"].size() == j["pending"].size());
  int64_t tables = db.count("SELECT count(*) FROM schema_migrations");
  CHECK(tables == int64_t(a1["applied"].size()));

  auto m2 = db.ok({"db", "migrate", "-o", "json"});
  CHECK(json::parse(m2.out)["applied"].empty());
  CHECK(db.count("SELECT count(*) FROM schema_migrations") == tables);

  auto st2 = db.ok({"db", "status", "-o", "json"});
  CHECK(json::parse(st2.out)["state"] == "current");
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
}

TEST_CASE("db: migrate --dry-run applies nothing") {
  TestDb db;
  auto r = db.ok({"db", "migrate", "--dry-run", "-o", "json"});
  CHECK(json::parse(r.out)["would_apply"].size() >= 1);
  db.ok({"db", "status"}, 1);
}

TEST_CASE("db: two concurrent migrates apply each migration exactly once") {
  TestDb db;
  // SQLite: the file does not exist yet, so both race to create it too
  rt::Run a, b;
  std::thread t1([&] { a = db.rc({"db", "migrate", "-o", "json"}); });
  std::thread t2([&] { b = db.rc({"db", "migrate", "-o", "json"}); });
  t1.join();
  t2.join();
  INFO(a.all() << "\n" << b.all());
  CHECK(a.rc == 0);
  CHECK(b.rc == 0);
  size_t applied = json::parse(a.out)["applied"].size() + json::parse(b.out)["applied"].size();
  int64_t rows = db.count("SELECT count(*) FROM schema_migrations");
  CHECK(int64_t(applied) == rows);
  CHECK(rows >= 1);
  db.ok({"db", "status"});
}

TEST_CASE("db: other commands refuse a database with pending migrations, naming the fix") {
  TestDb db;
  for (auto cmd : std::vector<std::vector<std::string>>{{"activity", "list"}, {"claim", "a", "--user", "u", "--biz-id", "b"},
                                                        {"ledger", "balance", "u"}}) {
    auto r = db.ok(cmd, 78);
    CHECK(r.err.find("rewardctl db migrate") != std::string::npos);
  }
  if (!rt::is_pg()) {
    struct stat sb;
    CHECK(stat((db.dir() + "/test.db").c_str(), &sb) != 0);  // nothing was created, not even an empty file
  }
}

TEST_CASE("db: a schema newer than the binary is refused") {
  TestDb db;
  db.migrate();
  db.open()->exec("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (9999, 'future', 'x', 0)");
  auto r = db.ok({"activity", "list"}, 78);
  CHECK(r.err.find("newer") != std::string::npos);
  db.ok({"db", "status"}, 1);
  db.ok({"db", "migrate"}, 78);
}

TEST_CASE("cli: bad input gets one line on stderr, its exit code, and writes nothing") {
  TestDb db;
  SUBCASE("unknown flag -> 64") {
    auto r = db.ok({"db", "status", "--frobnicate"}, 64);
    CHECK(rt::lines(r.err).size() == 1);
  }
  SUBCASE("malformed config -> 78 with file:line:column") {
    std::string cfg = rt::write_file(db.dir(), "bad.toml", "[db]\nurl = \n");
    auto r = db.ok({"--config", cfg, "db", "status"}, 78);
    CHECK(r.err.find(cfg + ":2:") != std::string::npos);
    CHECK(rt::lines(r.err).size() == 1);
  }
  SUBCASE("unknown scheme -> 78") {
    auto r = rt::run({"db", "migrate", "--db", "mysql://localhost/x"});
    CHECK(r.rc == 78);
    CHECK(r.err.find("unknown database scheme 'mysql'") != std::string::npos);
  }
  SUBCASE("database file in a missing directory -> 69, nothing created") {
    auto r = rt::run({"db", "migrate", "--db", "sqlite:" + db.dir() + "/no/such/dir/x.db"});
    CHECK(r.rc == 69);
    CHECK(r.err.find("does not exist") != std::string::npos);
    CHECK(rt::lines(r.err).size() == 1);
  }
  SUBCASE("unreachable PostgreSQL -> 69") {
    auto r = rt::run({"db", "status", "--db", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"});
    CHECK(r.rc == 69);
    CHECK(r.err.find("cannot connect to PostgreSQL") != std::string::npos);
  }
  SUBCASE("no subcommand -> 64") { CHECK(rt::run({}).rc == 64); }
}

TEST_CASE("cli: global options are accepted after the subcommand, results on stdout, logs on stderr") {
  TestDb db;
  auto r = rt::run({"db", "migrate", "--db", db.url(), "-o", "json", "--log-level", "info"});
  CHECK(r.rc == 0);
  CHECK(json::parse(r.out)["v"] == 1);
  CHECK(r.err.find("applied migration") != std::string::npos);
  auto q = rt::run({"db", "migrate", "--db", db.url(), "--quiet"});
  CHECK(q.rc == 0);
  CHECK(q.err.empty());
}

TEST_CASE("cli: help exit-codes prints the whole table") {
  auto r = rt::run({"help", "exit-codes", "-o", "json"});
  CHECK(r.rc == 0);
  auto ls = rt::lines(r.out);
  CHECK(ls.size() == 14);
  CHECK(json::parse(ls.back())["code"] == 130);
  std::set<int> listed;
  for (auto& l : ls) listed.insert(json::parse(l)["code"].get<int>());
  for (auto& k : rc::errc_table()) CHECK(listed.count(rc::exit_int(k.exit)) == 1);  // every error kind's code is listed
  CHECK(r.out.find("{\"code\":67,\"meaning\":\"the activity, record, bill or qualification named does not exist\",\"name\":\"not_found\"") !=
        std::string::npos);
}

TEST_CASE("db: stored functions are repeatable sources: migrate runs a changed one again, never an older one") {
  TestDb db;
  auto m = json::parse(db.ok({"db", "migrate", "-o", "json"}).out);
  if (!rt::is_pg()) {
    // SQLite has no stored functions: nothing recorded, nothing stale
    CHECK(m["functions"].empty());
    CHECK(json::parse(db.ok({"db", "status", "-o", "json"}).out)["functions_stale"].empty());
    return;
  }
  const std::set<std::string> both{"rewardctl_claim_chunk", "rewardctl_claim_one"};
  CHECK(std::set<std::string>(m["functions"].begin(), m["functions"].end()) == both);
  CHECK(db.count("SELECT count(*) FROM schema_functions") == 2);
  // a second migrate has nothing to run
  CHECK(json::parse(db.ok({"db", "migrate", "-o", "json"}).out)["functions"].empty());

  // A function changed by hand (or by an older source): status names it, exits 1; migrate puts
  // this binary's text back, and only that function.
  auto body = [&] {
    return db.open()->query("SELECT prosrc FROM pg_proc WHERE proname = 'rewardctl_claim_one' AND pronamespace = current_schema()::regnamespace").rows.at(0).str(0);
  };
  const std::string original = body();
  db.open()->autocommit().exec_script(
      "CREATE OR REPLACE FUNCTION rewardctl_claim_one(p_activity BIGINT, p_code TEXT, p_version BIGINT, p_now BIGINT, "
      "p_user TEXT, p_biz TEXT, p_record TEXT, p_prize BIGINT, p_amount BIGINT, p_cost BIGINT, p_bucket BIGINT, "
      "p_channel TEXT, p_source TEXT, p_expires BIGINT, p_actor TEXT, p_why TEXT, p_a_scope TEXT, p_a_period TEXT, "
      "p_a_limit BIGINT, p_p_scope TEXT, p_p_period TEXT, p_p_limit BIGINT, p_budget BOOLEAN, p_bill TEXT, "
      "p_asset TEXT, p_message TEXT, p_draw BIGINT DEFAULT NULL) RETURNS BIGINT LANGUAGE sql AS $$ SELECT NULL::bigint $$;"
      "UPDATE schema_functions SET checksum = 'hand-made' WHERE name = 'rewardctl_claim_one'");
  CHECK(body() != original);
  auto st = json::parse(db.ok({"db", "status", "-o", "json"}, 1).out);
  CHECK(st["state"] == "pending");
  CHECK(st["functions_stale"] == json::array({"rewardctl_claim_one"}));
  CHECK(json::parse(db.ok({"db", "migrate", "--dry-run", "-o", "json"}).out)["would_run_functions"] ==
        json::array({"rewardctl_claim_one"}));
  CHECK(body() != original);  // the dry run ran nothing
  auto again = json::parse(db.ok({"db", "migrate", "-o", "json"}).out);
  CHECK(again["applied"].empty());
  CHECK(again["functions"] == json::array({"rewardctl_claim_one"}));
  CHECK(body() == original);
  CHECK(json::parse(db.ok({"db", "status", "-o", "json"}).out)["state"] == "current");

  // Written by a binary that knows a newer schema: this (older) binary leaves it alone.
  db.open()->exec("UPDATE schema_functions SET checksum = 'newer', schema_version = 9999 WHERE name = 'rewardctl_claim_one'");
  CHECK(json::parse(db.ok({"db", "status", "-o", "json"}).out)["functions_stale"].empty());
  CHECK(json::parse(db.ok({"db", "migrate", "-o", "json"}).out)["functions"].empty());
  CHECK(db.count("SELECT count(*) FROM schema_functions WHERE checksum = 'newer'") == 1);
}
