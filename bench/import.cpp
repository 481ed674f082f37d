// bench/import: rewardctl import-qualifications against the storage engine's own bulk load of the
// same CSV into the same indexed table (DESIGN §8: >= 0.8x on 1M rows; peak RSS <= 64 MB on 10M),
// and a re-import of the same file (every row existing), unbatched and batched, against the first
// import into the same database (DESIGN §8: <= 1.5x).
//
//   build/bench/import [--rows N] [--reimport-rows N] [--big-rows N] [--repeat K]
//                      [--backend sqlite|postgres|both] [--keep]
//
// Defaults: 1,000,000 rows timed (best of 2, runs interleaved: these machines are noisy, only the
// ratio within one invocation means anything), the re-import of as many rows (batches of a tenth of
// the file), then 10,000,000 rows for rewardctl's peak RSS. A section with 0 rows is skipped.
// PostgreSQL: REWARDCTL_BENCH_PG, else REWARDCTL_TEST_PG, else a throwaway server started with scripts/pgtmp.sh and stopped at
// the end. Baselines: `psql \copy` (COPY FROM STDIN) into qualification, and `sqlite3 .import` —
// into qualification through a view (same table, same indexes) and, stricter, into a two-column
// table with a unique index on user_id (no trigger, narrower rows).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/store/store.hpp"

namespace {

struct Opts {
  int64_t rows = 1'000'000, reimport = -1, big = 10'000'000;
  int repeat = 2;
  bool sqlite = true, pg = true, keep = false;
};

struct Run {
  double seconds = 0;
  long rss_kb = 0;
};

std::string g_bin, g_src, g_dir;

[[noreturn]] void die(const std::string& m) {
  fprintf(stderr, "bench/import: %s\n", m.c_str());
  exit(1);
}

std::string dirname_of(const std::string& p) { return p.substr(0, p.rfind('/')); }

// The build's source directory, from CMakeCache.txt next to the binaries.
std::string source_dir(const std::string& build) {
  std::ifstream f(build + "/CMakeCache.txt");
  std::string l;
  while (std::getline(f, l))
    if (l.rfind("rewardctl_SOURCE_DIR:STATIC=", 0) == 0) return l.substr(28);
  die("cannot find rewardctl_SOURCE_DIR in " + build + "/CMakeCache.txt");
}

// Runs argv (stdout/stderr to the log), returns wall time and the child's peak RSS.
Run spawn(const std::vector<std::string>& argv, const std::string& what) {
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    FILE* log = fopen((g_dir + "/bench.log").c_str(), "a");
    if (log) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.rss_kb = ru.ru_maxrss;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    die(what + " failed (exit " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + "); see " + g_dir +
        "/bench.log");
  return r;
}

// Unique user ids in random order (i -> i * odd constant mod 10^12 is a bijection) and a tier column.
void generate(const std::string& path, int64_t n) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) die("cannot write " + path);
  static const char* tiers[] = {"gold", "silver", "bronze"};
  std::minstd_rand rng(42);
  fputs("user_id,tier\n", f);
  for (int64_t i = 0; i < n; ++i)
    fprintf(f, "u%012llu,%s\n", (unsigned long long)((uint64_t(i) * 2654435761ull + 12345) % 1000000000000ull),
            tiers[rng() % 3]);
  fclose(f);
}

const char* kActivity =
    "INSERT INTO activity (code, name, kind, state, definition, definition_hash, timezone, start_at, end_at, "
    "created_by, created_at, updated_at) VALUES ('bench', 'bench', 'direct', 'live', '{}', 'x', 'UTC', 0, "
    "4102444800000, 'bench', 0, 0)";

// A fresh, migrated database with the activity; returns its --db URL.
std::string fresh_db(bool pg, const std::string& base, const std::string& name) {
  std::string url;
  if (pg) {
    auto s = rc::store::open_postgres(base, {});
    s->exec("DROP SCHEMA IF EXISTS " + name + " CASCADE");
    s->exec("CREATE SCHEMA " + name);
    url = base + " options='-c search_path=" + name + "'";
  } else {
    url = "sqlite:" + g_dir + "/" + name + ".db";
  }
  spawn({g_bin, "--db", url, "-q", "db", "migrate"}, "db migrate");
  auto s = rc::store::open_store(rc::store::parse_dsn(url, "bench"), {});
  s->exec(kActivity);
  if (pg) s->exec("CHECKPOINT");
  return url;
}

// Drops a measured database (they are large).
void drop_db(bool pg, const std::string& base, const std::string& name) {
  if (pg) {
    rc::store::open_postgres(base, {})->exec("DROP SCHEMA IF EXISTS " + name + " CASCADE");
  } else {
    for (const char* suffix : {".db", ".db-wal", ".db-shm"}) unlink((g_dir + "/" + name + suffix).c_str());
  }
}

int64_t count_rows(const std::string& url, const std::string& table) {
  auto s = rc::store::open_store(rc::store::parse_dsn(url, "bench"), {});
  return s->query("SELECT count(*) FROM " + table)[0].i64(0);
}

void check_count(const std::string& url, const std::string& table, int64_t n, const std::string& what) {
  int64_t got = count_rows(url, table);
  if (got != n) die(what + " loaded " + std::to_string(got) + " rows, expected " + std::to_string(n));
}

Run ours(bool pg, const std::string& base, const std::string& csv, int64_t n, const std::string& name) {
  std::string url = fresh_db(pg, base, name);
  Run r = spawn({g_bin, "--db", url, "-q", "import-qualifications", "bench", csv, "--progress", "none"}, "rewardctl");
  check_count(url, "qualification", n, "rewardctl");
  drop_db(pg, base, name);
  return r;
}

// First import, re-import unbatched, re-import batched: three runs into one database.
struct Reimport {
  Run first, again, batched;
};
Reimport reimport(bool pg, const std::string& base, const std::string& csv, int64_t n, const std::string& name) {
  std::string url = fresh_db(pg, base, name);
  auto load = [&](const std::vector<std::string>& extra, const std::string& what) {
    std::vector<std::string> argv{g_bin, "--db", url, "-q", "import-qualifications", "bench", csv, "--progress", "none"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Run r = spawn(argv, what);
    check_count(url, "qualification", n, what);
    return r;
  };
  Reimport r;
  r.first = load({}, "first import");
  r.again = load({}, "re-import");
  r.batched = load({"--batch-size", std::to_string(std::max<int64_t>(1, n / 10))}, "batched re-import");
  drop_db(pg, base, name);
  return r;
}

Run pg_copy(const std::string& base, const std::string& csv, int64_t n, const std::string& name) {
  std::string url = fresh_db(true, base, name);
  auto s = rc::store::open_postgres(url, {});
  s->exec("ALTER TABLE qualification ALTER activity_id SET DEFAULT 1, ALTER created_at SET DEFAULT 0, "
          "ALTER updated_at SET DEFAULT 0");
  s.reset();
  std::string conn = base + " options='-c search_path=" + name + "'";
  Run r = spawn({"psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", conn, "-c",
                 "\\copy qualification (user_id, ext) FROM '" + csv + "' WITH (FORMAT csv, HEADER true)"},
                "psql \\copy");
  check_count(url, "qualification", n, "COPY");
  drop_db(true, base, name);
  return r;
}

// into qualification itself through a view (the file has 2 of its columns), or a 2-column table
Run sqlite_import(const std::string& csv, int64_t n, const std::string& name, bool view) {
  std::string url = fresh_db(false, "", name);
  std::string path = url.substr(7);
  auto s = rc::store::open_sqlite(path, {});
  if (view)
    s->transact(rc::store::TxMode::write, [](rc::store::Tx& tx) {
      tx.exec_script(
          "CREATE VIEW qualification_load (user_id, ext) AS SELECT user_id, ext FROM qualification;"
          "CREATE TRIGGER qualification_load_ins INSTEAD OF INSERT ON qualification_load BEGIN "
          "INSERT INTO qualification (activity_id, user_id, status, ext, created_at, updated_at) "
          "VALUES (1, NEW.user_id, 'unused', NEW.ext, 0, 0); END;");
    });
  else
    s->transact(rc::store::TxMode::write, [](rc::store::Tx& tx) {
      tx.exec_script("CREATE TABLE load2 (user_id TEXT NOT NULL, ext TEXT); CREATE UNIQUE INDEX load2_u ON load2 (user_id);");
    });
  s.reset();
  Run r = spawn({"sqlite3", path, ".import --csv --skip 1 " + csv + (view ? " qualification_load" : " load2")},
                "sqlite3 .import");
  check_count(url, view ? "qualification" : "load2", n, "sqlite3 .import");
  drop_db(false, "", name);
  return r;
}

void best(Run& b, const Run& r) {
  if (b.seconds == 0 || r.seconds < b.seconds) b.seconds = r.seconds;
  b.rss_kb = std::max(b.rss_kb, r.rss_kb);
}

void line(const char* backend, const std::string& what, int64_t n, const Run& r, bool rss) {
  char rssb[32] = "-";
  if (rss) snprintf(rssb, sizeof rssb, "%.1f MB", double(r.rss_kb) / 1024);
  printf("%-9s %-58s %9.2f %11.0f %10s\n", backend, what.c_str(), r.seconds, double(n) / r.seconds, rssb);
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&] {
      if (i + 1 >= argc) die("missing value for " + a);
      return std::string(argv[++i]);
    };
    if (a == "--rows") o.rows = std::stoll(val());
    else if (a == "--reimport-rows") o.reimport = std::stoll(val());
    else if (a == "--big-rows") o.big = std::stoll(val());
    else if (a == "--repeat") o.repeat = std::max(1, std::stoi(val()));
    else if (a == "--backend") {
      std::string b = val();
      o.sqlite = b == "sqlite" || b == "both";
      o.pg = b == "postgres" || b == "both";
    } else if (a == "--keep") o.keep = true;
    else
      die("usage: import [--rows N] [--reimport-rows N] [--big-rows N] [--repeat K] [--backend sqlite|postgres|both] "
          "[--keep]");
  }
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) die("cannot find myself");
  self[len] = 0;
  std::string build = dirname_of(dirname_of(self));
  g_bin = build + "/rewardctl";
  g_src = source_dir(build);
  char tmpl[] = "/tmp/rcbench.XXXXXX";
  if (!mkdtemp(tmpl)) die("mkdtemp failed");
  g_dir = tmpl;

  std::string pg_base, pg_stop;
  if (o.pg) {
    const char* env = getenv("REWARDCTL_BENCH_PG");  // (as the other benches), else the tests' server
    if (!env || !*env) env = getenv("REWARDCTL_TEST_PG");
    if (env && *env) {
      pg_base = env;
    } else {
      std::string cmd = "bash -c '. " + g_src + "/scripts/pgtmp.sh && pg_tmp_start >&2 && "
                        "printf \"%s\\n%s\\n%s\\n\" \"$PG_TMP_DSN\" \"$PG_TMP_DIR\" \"$PG_TMP_BIN\"'";
      FILE* p = popen(cmd.c_str(), "r");
      char buf[1024];
      std::vector<std::string> out;
      while (p && fgets(buf, sizeof buf, p)) out.emplace_back(buf, strcspn(buf, "\n"));
      if (!p || pclose(p) != 0 || out.size() != 3) die("could not start a PostgreSQL server (scripts/pgtmp.sh)");
      pg_base = out[0];
      pg_stop = "bash -c 'PG_TMP_DIR=" + out[1] + " PG_TMP_BIN=" + out[2] + "; PG_TMP_AS=(); [ \"$(id -u)\" = 0 ] && "
                "PG_TMP_AS=(runuser -u postgres --); . " + g_src + "/scripts/pgtmp.sh; pg_tmp_stop'";
    }
  }

  if (o.rows > 0) {
    std::string csv = g_dir + "/rows.csv";
    generate(csv, o.rows);
    printf("rewardctl import-qualifications vs the engine's bulk load: %lld rows, best of %d, interleaved\n",
           (long long)o.rows, o.repeat);
    printf("%-9s %-58s %9s %11s %10s\n", "backend", "load", "seconds", "rows/s", "peak RSS");
    if (o.pg) {
      Run a, b;
      for (int r = 0; r < o.repeat; ++r) {
        std::string k = std::to_string(r);
        if (r % 2 == 0) best(b, pg_copy(pg_base, csv, o.rows, "bench_copy" + k));
        best(a, ours(true, pg_base, csv, o.rows, "bench_rc" + k));
        if (r % 2 == 1) best(b, pg_copy(pg_base, csv, o.rows, "bench_copy" + k));
      }
      line("postgres", "rewardctl import-qualifications", o.rows, a, true);
      line("postgres", "COPY FROM STDIN (psql \\copy) into qualification", o.rows, b, false);
      printf("%-9s ratio rewardctl / COPY = %.2f (target >= 0.8)\n", "postgres", b.seconds / a.seconds);
    }
    if (o.sqlite) {
      Run a, v, t;
      for (int r = 0; r < o.repeat; ++r) {
        std::string k = std::to_string(r);
        if (r % 2 == 0) best(t, sqlite_import(csv, o.rows, "bench_table" + k, false));
        best(a, ours(false, "", csv, o.rows, "bench_rc" + k));
        best(v, sqlite_import(csv, o.rows, "bench_view" + k, true));
        if (r % 2 == 1) best(t, sqlite_import(csv, o.rows, "bench_table" + k, false));
      }
      line("sqlite", "rewardctl import-qualifications", o.rows, a, true);
      line("sqlite", "sqlite3 .import into qualification (through a view)", o.rows, v, false);
      line("sqlite", "sqlite3 .import into (user_id, ext) + unique index", o.rows, t, false);
      printf("%-9s ratio rewardctl / .import = %.2f into qualification, %.2f into the 2-column table (target >= 0.8)\n",
             "sqlite", v.seconds / a.seconds, t.seconds / a.seconds);
    }
  }
  if (o.reimport < 0) o.reimport = o.rows;
  if (o.reimport > 0) {
    std::string csv = g_dir + "/again.csv";
    generate(csv, o.reimport);
    printf("\nre-import of the same %lld rows (all existing) vs the first import into the same database, best of %d\n",
           (long long)o.reimport, o.repeat);
    printf("%-9s %-58s %9s %11s %10s\n", "backend", "load", "seconds", "rows/s", "vs first");
    for (int b = 0; b < 2; ++b) {
      const bool pg = b == 0;
      if (pg ? !o.pg : !o.sqlite) continue;
      Reimport best_of;
      for (int r = 0; r < o.repeat; ++r) {
        Reimport x = reimport(pg, pg_base, csv, o.reimport, "bench_again" + std::to_string(r));
        best(best_of.first, x.first);
        best(best_of.again, x.again);
        best(best_of.batched, x.batched);
      }
      const char* be = pg ? "postgres" : "sqlite";
      auto row = [&](const std::string& what, const Run& r) {
        printf("%-9s %-58s %9.2f %11.0f %9.2fx\n", be, what.c_str(), r.seconds, double(o.reimport) / r.seconds,
               r.seconds / best_of.first.seconds);
      };
      row("first import (unbatched)", best_of.first);
      row("re-import, unbatched", best_of.again);
      row("re-import, --batch-size " + std::to_string(std::max<int64_t>(1, o.reimport / 10)), best_of.batched);
      printf("%-9s ratio re-import / first import = %.2f unbatched, %.2f batched (target <= 1.5)\n", be,
             best_of.again.seconds / best_of.first.seconds, best_of.batched.seconds / best_of.first.seconds);
    }
  }
  if (o.big > 0) {
    std::string csv = g_dir + "/big.csv";
    generate(csv, o.big);
    printf("\n%lld rows, rewardctl only (peak RSS target <= 64 MB)\n", (long long)o.big);
    if (o.pg) line("postgres", "rewardctl import-qualifications", o.big, ours(true, pg_base, csv, o.big, "bench_big"), true);
    if (o.sqlite) line("sqlite", "rewardctl import-qualifications", o.big, ours(false, "", csv, o.big, "bench_big"), true);
  }

  if (!pg_stop.empty()) (void)!system(pg_stop.c_str());
  if (!o.keep) (void)!system(("rm -rf '" + g_dir + "'").c_str());
  else printf("kept %s\n", g_dir.c_str());
  return 0;
}
