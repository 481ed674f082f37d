#include "support/harness.hpp"

#include <chrono>
#include <thread>

#include "jobs/reconcile/reconcile.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <grp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>

extern char** environ;

namespace rt {

std::string make_temp_dir() {
  std::string t = "/tmp/rctest.XXXXXX";
  if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
  return t;
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& content) {
  std::string p = dir + "/" + name;
  std::ofstream f(p, std::ios::binary);
  f << content;
  return p;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l))
    if (!l.empty()) out.push_back(l);
  return out;
}

namespace {
Run run_as(const std::vector<std::string>& argv_s, const std::map<std::string, std::string>& env,
           const std::string& input, const std::string& cwd, int as_uid);
}  // namespace

Run run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env, const std::string& input,
        const std::string& cwd, int as_uid) {
  std::vector<std::string> argv_s{REWARDCTL_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  return run_as(argv_s, env, input, cwd, as_uid);
}

Run run_program(const std::vector<std::string>& argv_s, const std::map<std::string, std::string>& env,
                const std::string& input, const std::string& cwd) {
  return run_as(argv_s, env, input, cwd, -1);
}

namespace {
// argv[0] is a path or found on PATH; as_uid >= 0 (root only) runs the child as that user and group
Run run_as(const std::vector<std::string>& argv_s, const std::map<std::string, std::string>& env,
           const std::string& input, const std::string& cwd, int as_uid) {
  std::string tmp = make_temp_dir();
  std::string in = write_file(tmp, "in", input), outp = tmp + "/out", errp = tmp + "/err";
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos && env.count(kv.substr(0, eq))) continue;
    // the tests control these: a developer's own settings must not leak in
    if (kv.rfind("REWARDCTL_DB=", 0) == 0 || kv.rfind("REWARDCTL_CONFIG=", 0) == 0 ||
        kv.rfind("REWARDCTL_OUTPUT=", 0) == 0 || kv.rfind("REWARDCTL_NOW=", 0) == 0)
      continue;
    envs.push_back(kv);
  }
  for (auto& [k, v] : env) envs.push_back(k + "=" + v);
  // through the pooler, every rewardctl run is told so (as an operator's config would)
  if (is_pooled() && !env.count("REWARDCTL_DB_POOLER")) envs.push_back("REWARDCTL_DB_POOLER=transaction");
  std::vector<char*> envp;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  pid_t pid = fork();
  if (pid == 0) {
    int fi = open(in.c_str(), O_RDONLY), fo = open(outp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644),
        fe = open(errp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fi, 0);
    dup2(fo, 1);
    dup2(fe, 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    if (as_uid >= 0 && (setgroups(0, nullptr) != 0 || setgid(gid_t(as_uid)) != 0 || setuid(uid_t(as_uid)) != 0)) _exit(126);
    environ = envp.data();
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Run r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(outp);
  r.err = read_file(errp);
  std::string cmd = "rm -rf '" + tmp + "'";
  (void)!system(cmd.c_str());
  return r;
}
}  // namespace

std::string backend() {
  const char* b = std::getenv("REWARDCTL_TEST_BACKEND");
  return b && *b ? b : "sqlite";
}

bool is_pg() { return backend() == "postgres" || backend() == "pgbouncer"; }

bool is_pooled() { return backend() == "pgbouncer"; }

rc::store::StoreOptions store_options() {
  rc::store::StoreOptions o;
  o.pooled = is_pooled();
  return o;
}

static std::string pg_base() {
  const char* p = std::getenv("REWARDCTL_TEST_PG");
  if (!p || !*p)
    FAIL("the PostgreSQL suite needs a server: run `scripts/dev test`, or set REWARDCTL_TEST_PG to a conninfo");
  return p;
}

TestDb::TestDb() {
  dir_ = make_temp_dir();
  if (backend() == "sqlite") {
    url_ = "sqlite:" + dir_ + "/test.db";
    return;
  }
  REQUIRE(is_pg());
  std::random_device rd;
  schema_ = "t" + std::to_string(getpid()) + "_" + std::to_string(rd() % 1000000000);
  auto base = pg_base();
  auto s = rc::store::open_postgres(base, {});
  if (!is_pooled()) {
    s->exec("CREATE SCHEMA " + schema_);
    url_ = base + " options='-c search_path=" + schema_ + "'";
    return;
  }
  // Through the pooler: a database of its own (PgBouncer refuses the `options` startup parameter
  // that picks a schema, and every database name passes through to the server).
  const char* p = std::getenv("REWARDCTL_TEST_PGBOUNCER");
  if (!p || !*p)
    FAIL("the pooled suite needs PgBouncer: run `scripts/dev test`, or set REWARDCTL_TEST_PGBOUNCER to a conninfo");
  s->exec("CREATE DATABASE " + schema_);
  database_ = schema_;
  // every rewardctl a test starts (run_as, spawn helpers of their own) runs as a pooled client
  ::setenv("REWARDCTL_DB_POOLER", "transaction", 1);
  url_ = std::string(p) + " dbname=" + schema_;
}

void TestDb::check_books() const {
  std::unique_ptr<rc::store::Store> st;
  try {
    st = open();
    auto used = st->query(
        "SELECT (SELECT count(*) FROM grants) + (SELECT count(*) FROM qualification) + "
        "(SELECT count(*) FROM ledger_entry) + (SELECT count(*) FROM resend_bill)");
    if (used[0].i64(0) == 0) return;
  } catch (const rc::Error&) {
    return;  // never migrated, or the test took the database away: nothing to reconcile
  }
  namespace rec = rc::jobs::reconcile;
  rec::Options o;
  for (auto& c : rec::checks())
    if (std::string(c.name) != "stuck") o.checks.push_back(c.name);
  o.exact = true;  // every check's full queries
  auto diffs = rec::find_diffs(*st, o, 0);
  std::string text;
  for (auto& d : diffs)
    text += "\n  " + d.check + " " + d.entity + " " + d.key + ": expected " + d.expected + ", actual " + d.actual +
            (d.detail.empty() ? "" : " (" + d.detail + ")");
  INFO("reconcile (the oracle) found " << diffs.size() << " difference(s) at the end of the test:" << text);
  CHECK(diffs.empty());
  if (!diffs.empty() || st->dialect() != rc::store::Dialect::postgres) return;
  // Sound books: on PostgreSQL the fingerprints of every check that has them agree too (a
  // fingerprint that differs on sound books is not wrong, the full queries then decide, but it
  // would make every run pay for them), and the run that uses them finds nothing either.
  o.exact = false;
  std::vector<std::string> proven;
  auto fast = rec::find_diffs(*st, o, 0, nullptr, nullptr, &proven);
  std::vector<std::string> fingerprinted;
  for (auto& c : rec::checks())
    if (c.fingerprints) fingerprinted.push_back(c.name);
  INFO("reconcile (the oracle): checks proven by their fingerprints on sound books: " << [&] {
    std::string s;
    for (auto& c : proven) s += c + " ";
    return s;
  }());
  CHECK(fast.empty());
  CHECK(proven == fingerprinted);
}

TestDb::~TestDb() {
  // Not while a failed REQUIRE unwinds: the test already failed, and its database may be half-done.
  if (oracle_ && std::uncaught_exceptions() == 0) {
    try {
      check_books();
    } catch (const std::exception& e) {
      FAIL_CHECK("reconcile (the oracle) could not run: " << e.what());
    }
  }
  try {
    if (!database_.empty()) {
      auto s = rc::store::open_postgres(pg_base(), {});
      s->exec("DROP DATABASE " + database_ + " WITH (FORCE)");  // FORCE: the pooler's connections
    } else if (!schema_.empty()) {
      auto s = rc::store::open_postgres(pg_base(), {});
      s->exec("DROP SCHEMA " + schema_ + " CASCADE");
    }
  } catch (...) {
  }
  std::string cmd = "rm -rf '" + dir_ + "'";
  (void)!system(cmd.c_str());
}

Run TestDb::rc(std::vector<std::string> args, const std::map<std::string, std::string>& env,
               const std::string& input) const {
  args.insert(args.begin(), {"--db", url_});
  return run(args, env, input, dir_);
}

Run TestDb::rc_as(int uid, std::vector<std::string> args) const {
  args.insert(args.begin(), {"--db", url_});
  return run(args, {}, "", dir_, uid);
}

Run TestDb::ok(std::vector<std::string> args, int expect, const std::map<std::string, std::string>& env,
               const std::string& input) const {
  auto r = rc(args, env, input);
  std::string cmd;
  for (auto& a : args) cmd += a + " ";
  INFO("rewardctl " << cmd << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.rc == expect);
  return r;
}

std::unique_ptr<rc::store::Store> TestDb::open() const {
  return rc::store::open_store(rc::store::parse_dsn(url_, "test"), store_options());
}

std::string TestDb::replica_url() const {
  REQUIRE(is_pg());
  REQUIRE_MESSAGE(!is_pooled(), "the standby is tested on direct connections");
  const char* r = std::getenv("REWARDCTL_TEST_PG_REPLICA");
  REQUIRE_MESSAGE((r && *r), "REWARDCTL_TEST_PG_REPLICA is not set: run the tests with scripts/dev test, which starts the standby");
  return std::string(r) + " options='-c search_path=" + schema_ + "'";
}

void TestDb::wait_for_replica() const {
  auto primary = open();
  const std::string lsn = primary->autocommit().query("SELECT CAST(pg_current_wal_lsn() AS TEXT)", {})[0].str(0);
  auto standby = rc::store::open_store(rc::store::parse_dsn(replica_url(), "test"), store_options());
  bool caught_up = false;
  for (int i = 0; i < 3000 && !caught_up; ++i) {
    caught_up = standby->autocommit()
                    .query("SELECT CASE WHEN pg_last_wal_replay_lsn() >= CAST($1 AS pg_lsn) THEN 1 ELSE 0 END", {lsn})[0]
                    .i64(0) == 1;
    if (!caught_up) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE_MESSAGE(caught_up, "the standby did not replay the primary's WAL within 30 s");
}

int64_t TestDb::count(const std::string& sql, const rc::store::Params& p) const {
  auto s = open();
  auto r = s->query(sql, p);
  REQUIRE(r.size() == 1);
  return r[0].i64(0);
}

void TestDb::migrate() const {
  auto r = rc({"db", "migrate"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
}

nlohmann::json last_json(const Run& r) {
  auto ls = lines(r.out);
  REQUIRE(!ls.empty());
  return nlohmann::json::parse(ls.back());
}

}  // namespace rt
