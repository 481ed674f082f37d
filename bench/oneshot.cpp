// bench/oneshot: what one `rewardctl claim` process costs against the sqlite3 command-line shell
// doing the raw claim, measured in the same run on the same machine: each is a fresh process on a
// fresh connection to a WAL database with synchronous=FULL, as a cron job or a script calls it.
//   A  rewardctl claim ACT --user U --biz-id B       (the full claim: gate, grant, ledger delivery)
//   B  sqlite3 raw.db "<the rows that claim writes>" (grant, 2 status-log rows, stock, bill, ledger
//      entry and account, by hand, in one BEGIN IMMEDIATE ... COMMIT)
// Runs are paired A B A B ..., and the table gives the median of each and the ratio A / B. Two more
// rows say where a claim's time goes: `rewardctl version` (process start: loading, static set-up)
// and `rewardctl db status` (that plus opening the database and reading its schema).
//
//   bench/oneshot [--runs N] [--bin PATH] [--sqlite3 PATH] [-o json]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace {

using Clk = std::chrono::steady_clock;

// Runs argv with stdout and stderr to /dev/null (or to `out`); the wall time in ms, or -1 when
// the process failed.
double run(const std::vector<std::string>& argv, std::string* out = nullptr) {
  std::vector<char*> a;
  for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  char tmpl[] = "/tmp/oneshot-out.XXXXXX";
  int fd = mkstemp(tmpl);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  auto t0 = Clk::now();
  if (posix_spawnp(&pid, a[0], &fa, nullptr, a.data(), environ) != 0) {
    std::fprintf(stderr, "oneshot: cannot start %s\n", a[0]);
    std::exit(69);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  double ms = std::chrono::duration<double, std::milli>(Clk::now() - t0).count();
  posix_spawn_file_actions_destroy(&fa);
  if (out) {
    std::ifstream in(tmpl);
    out->assign(std::istreambuf_iterator<char>(in), {});
  }
  close(fd);
  unlink(tmpl);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? ms : -1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void must(double ms, const std::string& what) {
  if (ms < 0) {
    std::fprintf(stderr, "oneshot: %s failed\n", what.c_str());
    std::exit(70);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20;
  std::string bin = REWARDCTL_BIN, sqlite3 = "sqlite3";
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (a == "--bin" && i + 1 < argc) bin = argv[++i];
    else if (a == "--sqlite3" && i + 1 < argc) sqlite3 = argv[++i];
    else if (a == "-o" && i + 1 < argc) json = std::string(argv[++i]) == "json";
    else {
      std::fprintf(stderr, "usage: oneshot [--runs N] [--bin PATH] [--sqlite3 PATH] [-o json]\n");
      return 64;
    }
  }
  if (runs < 1) runs = 1;
  char dtmpl[] = "/tmp/rewardctl-oneshot.XXXXXX";
  const std::string dir = mkdtemp(dtmpl);
  const std::string db = "sqlite:" + dir + "/rc.db", raw = dir + "/raw.db";
  setenv("REWARDCTL_REVIEW_REQUIRED", "false", 1);  // the bench seeds its own activity alone
  must(run({bin, "--db", db, "db", "migrate"}), "db migrate");
  {
    std::ofstream def(dir + "/act.toml");
    def << "code = \"one\"\nname = \"one\"\nkind = \"direct\"\ntimezone = \"UTC\"\n"
           "start = \"2020-01-01T00:00:00Z\"\nend = \"2099-01-01T00:00:00Z\"\n"
           "[items.coupon]\nkind = \"coupon\"\nunit_cost_cents = 100\nchannel = \"ledger\"\n"
           "[[prizes]]\ncode = \"p\"\nitem = \"coupon\"\namount = 1\nstock = 100000000\n";
  }
  must(run({bin, "--db", db, "activity", "create", "-f", dir + "/act.toml", "--publish", "--operator", "bench"}),
       "activity create");
  // the raw side: the same schema and activity, in a database of its own
  must(run({sqlite3, dir + "/rc.db", "VACUUM INTO '" + raw + "'"}), "sqlite3 VACUUM INTO");
  must(run({sqlite3, raw, "PRAGMA journal_mode=WAL"}), "sqlite3 journal_mode");
  auto raw_claim = [&](int i) {
    const std::string n = std::to_string(i), u = "'u" + n + "'", b = "'b" + n + "'", bill = "'L" + n + "'";
    return "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; BEGIN IMMEDIATE; "
           "UPDATE stock SET remain = remain - 1 WHERE prize_id = 1 AND remain > 0; "
           "INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state, bucket, "
           "pool_version, channel, bill_no, created_at, updated_at) VALUES ('R" + n + "', " + b + ", 1, 1, " + u +
           ", 1, 100, 'success', (SELECT min(bucket) FROM stock WHERE prize_id = 1), 1, 'ledger', " + bill + ", " + n + ", " + n + "); "
           "INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, created_at) SELECT 'grant', "
           "id, NULL, 'init', 'bench', 'claim', " + n + " FROM grants WHERE biz_id = " + b + "; "
           "INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, created_at) SELECT 'grant', "
           "id, 'init', 'success', 'bench', 'ledger credited', " + n + " FROM grants WHERE biz_id = " + b + "; "
           "INSERT INTO delivery_bill (bill_no, grant_id, channel, amount, state, attempts, last_code, last_message, "
           "created_at, updated_at) SELECT " + bill + ", id, 'ledger', 1, 'success', 1, '0', 'credited', " + n + ", " +
           n + " FROM grants WHERE biz_id = " + b + "; "
           "INSERT INTO ledger_entry (bill_no, kind, user_id, asset, amount, created_at) VALUES (" + bill +
           ", 'credit', " + u + ", 'coupon:coupon', 1, " + n + "); "
           "INSERT INTO ledger_account (user_id, asset, balance, updated_at) VALUES (" + u + ", 'coupon:coupon', 1, " +
           n + ") ON CONFLICT (user_id, asset) DO UPDATE SET balance = ledger_account.balance + excluded.balance; "
           "COMMIT;";
  };
  // one warm-up of each, not counted
  must(run({bin, "--db", db, "claim", "one", "--user", "w", "--biz-id", "w"}), "rewardctl claim");
  must(run({sqlite3, raw, raw_claim(0)}), "sqlite3 raw claim");
  std::map<std::string, std::vector<double>> t;
  for (int i = 1; i <= runs; ++i) {
    const std::string n = std::to_string(i);
    double a = run({bin, "--db", db, "claim", "one", "--user", "u" + n, "--biz-id", "b" + n});
    must(a, "rewardctl claim");
    double b = run({sqlite3, raw, raw_claim(i)});
    must(b, "sqlite3 raw claim");
    t["claim"].push_back(a);
    t["raw"].push_back(b);
    t["version"].push_back(run({bin, "version"}));
    t["status"].push_back(run({bin, "--db", db, "db", "status"}));
  }
  // every claim granted, exactly once each, on both sides
  std::string granted, raw_granted;
  run({sqlite3, dir + "/rc.db", "SELECT count(*) FROM grants WHERE state = 'success'"}, &granted);
  run({sqlite3, raw, "SELECT count(*) FROM grants WHERE state = 'success'"}, &raw_granted);
  if (std::atoi(granted.c_str()) != runs + 1 || std::atoi(raw_granted.c_str()) != runs + 1) {
    std::fprintf(stderr, "oneshot: expected %d grants on each side, found %s and %s\n", runs + 1, granted.c_str(),
                 raw_granted.c_str());
    return 70;
  }
  const double c = median(t["claim"]), r = median(t["raw"]), v = median(t["version"]), s = median(t["status"]);
  if (json) {
    std::printf("{\"runs\": %d, \"claim_ms\": %.2f, \"raw_sqlite3_ms\": %.2f, \"ratio\": %.2f, \"version_ms\": %.2f, "
                "\"db_status_ms\": %.2f}\n",
                runs, c, r, c / r, v, s);
  } else {
    std::printf("one-shot process, SQLite WAL, synchronous=FULL, median of %d paired runs\n", runs);
    std::printf("%-44s %10s %8s\n", "command", "ms", "x raw");
    std::printf("%-44s %10.2f %8.2f\n", "rewardctl claim (full claim, ledger)", c, c / r);
    std::printf("%-44s %10.2f %8.2f\n", "sqlite3 raw claim (the same rows by hand)", r, 1.0);
    std::printf("%-44s %10.2f %8.2f\n", "rewardctl version (process start)", v, v / r);
    std::printf("%-44s %10.2f %8.2f\n", "rewardctl db status (start, open, schema)", s, s / r);
  }
  std::string cleanup = "rm -rf '" + dir + "'";
  return std::system(cleanup.c_str()) == 0 ? 0 : 0;
}
