// reconcile: runs the checks of reconcile_checks.cpp on one snapshot and keeps the result.
#include "jobs/reconcile.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "jobs/reconcile_checks.hpp"

namespace rc::jobs::reconcile {

std::pair<std::string, store::Params> bind_named(const std::string& sql,
                                                 const std::map<std::string, store::Value>& values) {
  std::string out;
  out.reserve(sql.size());
  store::Params params;
  std::map<std::string, size_t> index;
  bool in_str = false;
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (c == '\'') in_str = !in_str;
    if (in_str || c != ':' || i + 1 >= sql.size() || !std::isalpha(static_cast<unsigned char>(sql[i + 1]))) {
      out += c;
      continue;
    }
    size_t j = i + 1;
    while (j < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[j])) || sql[j] == '_')) ++j;
    std::string name = sql.substr(i + 1, j - i - 1);
    auto v = values.find(name);
    if (v == values.end()) throw Error(Exit::internal, "reconcile: no value for parameter :" + name);
    auto [it, added] = index.emplace(name, params.size() + 1);
    if (added) params.push_back(v->second);
    out += "$" + std::to_string(it->second);
    i = j - 1;
  }
  return {out, params};
}

std::vector<std::string> resolve_checks(const std::vector<std::string>& names) {
  std::vector<std::string> all;
  for (auto& c : check_table()) all.push_back(c.info.name);
  if (names.empty()) return all;
  std::set<std::string> wanted;
  for (auto& n : names) {
    if (std::find(all.begin(), all.end(), n) == all.end()) {
      std::string list;
      for (auto& a : all) list += (list.empty() ? "" : ", ") + a;
      throw Error(Exit::usage, "--checks: unknown check '" + n + "' (known: " + list + ")");
    }
    wanted.insert(n);
  }
  std::vector<std::string> out;  // in the table's order, each once
  for (auto& a : all)
    if (wanted.count(a)) out.push_back(a);
  return out;
}

void tune_read(store::Tx& tx) {
  // The checks sort and hash whole tables: give them memory rather than temporary files (for this
  // transaction on PostgreSQL; for this connection on SQLite, whose process is a short-lived job).
  if (tx.dialect() == store::Dialect::postgres) tx.exec_script("SET LOCAL work_mem = '256MB'; SET LOCAL jit = off");
  else tx.exec_script("PRAGMA cache_size = -262144");  // (temp_store cannot change inside a transaction)
}

namespace {

// The checks of one run, shared by the connections that perform them. Each connection takes the
// next check in the table's order, so `more` (asked under the lock before each check) still skips
// a check and every later one; a failure stops the taking and is rethrown once all have finished.
struct Queue {
  std::vector<const Check*> todo;        // the selected checks, in the table's order
  std::vector<std::vector<Diff>> diffs;  // per check of todo, filled by the connection that ran it
  std::vector<double> seconds;
  std::vector<char> ran;
  size_t next = 0;
  bool stop = false;
  std::exception_ptr error;
  std::mutex mu;

  // The next check to perform (its index in todo), or false: none left, stopped, or failed.
  bool take(const Options& o, size_t& slot) {
    std::lock_guard<std::mutex> l(mu);
    if (stop || next >= todo.size()) return false;
    if (o.more && !o.more()) {
      stop = true;
      return false;
    }
    slot = next++;
    return true;
  }
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> l(mu);
    if (!error) error = e;
    stop = true;
  }
};

// Performs checks from the queue in tx until none is left. Never throws: a failure goes to the
// queue (a transaction retried by its store must not lose a check it had taken).
void perform(store::Tx& tx, Queue& q, const Options& o, const std::map<std::string, store::Value>& values) {
  try {
    size_t slot = 0;
    while (q.take(o, slot)) {
      const Check& c = *q.todo[slot];
      auto t0 = std::chrono::steady_clock::now();
      const bool own = tx.dialect() == store::Dialect::sqlite && !c.sqlite_sql.empty();
      auto [sql, params] = bind_named(own ? c.sqlite_sql : c.sql, values);
      spdlog::trace("reconcile check {}: {}", c.info.name, sql);
      auto r = tx.query(sql, params);
      auto& out = q.diffs[slot];
      for (auto& row : r.rows) {
        Diff d{c.info.name, row.str(0), row.str(1), row.str_or(2, ""), row.str_or(3, ""), row.str_or(4, "")};
        if (!row.is_null(5)) d.detail += (d.detail.empty() ? "" : " ") + format_utc(row.i64(5));
        out.push_back(std::move(d));
      }
      q.seconds[slot] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      q.ran[slot] = 1;
      spdlog::debug("reconcile check {}: {} diff(s) in {:.3f} s", c.info.name, r.size(), q.seconds[slot]);
    }
  } catch (...) {
    q.fail(std::current_exception());
  }
}

}  // namespace

int connections_for(store::Session& s, const Options& o, size_t checks) {
  if (s.dialect() != store::Dialect::postgres || checks < 2) return 1;
  if (o.connections > 0) return std::min<int>(o.connections, int(checks));
  auto r = s.query("SELECT CAST(coalesce(max(c.reltuples), 0) AS BIGINT), CAST(current_setting("
                   "'max_parallel_workers_per_gather') AS BIGINT) FROM pg_class c WHERE c.oid = to_regclass('grants')");
  if (r[0].i64(0) < kSideBySideFrom) return 1;
  return int(std::clamp<int64_t>(1 + r[0].i64(1), 1, std::min<int64_t>(kMostConnections, int64_t(checks))));
}

std::vector<Diff> find_diffs(store::Store& st, const Options& o, Millis now,
                             std::vector<std::pair<std::string, double>>* seconds,
                             std::vector<std::string>* skipped) {
  const auto names = resolve_checks(o.checks);
  std::string ledger;
  for (auto& c : o.ledger_channels) ledger += (ledger.empty() ? "" : ",") + c;
  const std::map<std::string, store::Value> values{
      {"activity", store::opt(o.activity)},
      {"stuck", now - o.stuck_after_ms},
      {"held", now - o.held_after_ms},
      {"ledger", ledger},
  };
  std::vector<Diff> diffs;
  // One snapshot: every check reads it (PostgreSQL: REPEATABLE READ). A second connection, when
  // there is one, imports the same snapshot (pg_export_snapshot / SET TRANSACTION SNAPSHOT) while
  // this transaction, which exported it, stays open until every check has finished.
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    diffs.clear();
    if (seconds) seconds->clear();
    if (skipped) skipped->clear();
    tune_read(tx);
    if (o.activity && tx.query("SELECT 1 FROM activity WHERE code = $1", {*o.activity}).empty())
      throw Error(Exit::not_found, "--activity: no activity '" + *o.activity + "'");
    Queue q;
    for (auto& c : check_table())
      if (std::find(names.begin(), names.end(), c.info.name) != names.end()) q.todo.push_back(&c);
    q.diffs.resize(q.todo.size());
    q.seconds.assign(q.todo.size(), 0);
    q.ran.assign(q.todo.size(), 0);
    const int n = connections_for(tx, o, q.todo.size());
    std::vector<store::Store*> companions;  // (opened here, on this thread, before any other starts)
    for (int i = 1; i < n; ++i)
      if (auto* c = st.companion(size_t(i - 1))) companions.push_back(c);
    std::string snapshot;
    if (!companions.empty()) {
      snapshot = tx.query("SELECT pg_export_snapshot()")[0].str(0);
      // (a utility statement takes no parameter: the identifier is checked to be what PostgreSQL
      // makes, hexadecimal groups joined by dashes, before it is quoted into the text)
      if (snapshot.empty() || snapshot.find_first_not_of("0123456789ABCDEFabcdef-") != std::string::npos)
        throw Error(Exit::internal, "reconcile: unexpected snapshot identifier '" + snapshot + "'");
    }
    struct Joiner {
      std::vector<std::thread> threads;
      ~Joiner() {
        for (auto& t : threads)
          if (t.joinable()) t.join();
      }
    } others;
    for (auto* other : companions)
      others.threads.emplace_back([other, &q, &o, &values, &snapshot] {
        try {
          other->transact(store::TxMode::read, [&](store::Tx& t) {
            t.exec_script("SET TRANSACTION SNAPSHOT '" + snapshot + "'");
            tune_read(t);
            perform(t, q, o, values);
          });
        } catch (...) {
          q.fail(std::current_exception());
        }
      });
    perform(tx, q, o, values);
    for (auto& t : others.threads) t.join();
    if (q.error) std::rethrow_exception(q.error);
    for (size_t i = 0; i < q.todo.size(); ++i) {
      if (!q.ran[i]) {
        if (skipped) skipped->push_back(q.todo[i]->info.name);
        continue;
      }
      for (auto& d : q.diffs[i]) diffs.push_back(std::move(d));
      if (seconds) seconds->emplace_back(q.todo[i]->info.name, q.seconds[i]);
    }
  });
  return diffs;
}

static std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

Report run(store::Store& st, const Options& o, const Clock& clock) {
  Report rep;
  rep.checks = resolve_checks(o.checks);
  rep.activity = o.activity;
  rep.dry_run = o.dry_run;
  rep.started_at = clock.now_ms();
  auto t0 = std::chrono::steady_clock::now();
  // The scope is kept with the run: "stock,budget" or "stock,budget @ ACTIVITY".
  const std::string scope = join(rep.checks) + (o.activity ? " @ " + *o.activity : "");
  if (!o.dry_run) {
    rep.run_id = store::transact(st, store::TxMode::write, [&](store::Tx& tx) {
      return tx.query(
                   "INSERT INTO reconcile_run (checks, state, diff_count, operator, started_at) "
                   "VALUES ($1, 'running', 0, $2, $3) RETURNING id",
                   {scope, o.operator_name, rep.started_at})[0]
          .i64(0);
    });
  }
  try {
    rep.diffs = find_diffs(st, o, rep.started_at, nullptr, &rep.skipped);
  } catch (...) {
    if (rep.run_id) {
      try {
        st.exec("UPDATE reconcile_run SET state = 'failed', finished_at = $2 WHERE id = $1 AND state = 'running'",
                {rep.run_id, clock.now_ms()});
      } catch (...) {  // the database went away: the run stays 'running', never 'clean'
      }
    }
    throw;
  }
  rep.finished_at = clock.now_ms();
  if (rep.run_id) {
    st.transact(store::TxMode::write, [&](store::Tx& tx) {
      for (auto& d : rep.diffs)
        tx.exec(
            "INSERT INTO reconcile_diff (run_id, check_name, entity, entity_key, expected, actual, detail, created_at) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            {rep.run_id, d.check, d.entity, d.key, d.expected, d.actual, d.detail, rep.finished_at});
      tx.exec("UPDATE reconcile_run SET state = $2, diff_count = $3, finished_at = $4 WHERE id = $1",
              {rep.run_id, !rep.diffs.empty() ? "diffs" : rep.skipped.empty() ? "clean" : "incomplete",
               int64_t(rep.diffs.size()), rep.finished_at});
    });
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

static RunSummary to_summary(const store::Row& r) {
  return RunSummary{r.i64(0), r.str(1), r.str(2), r.str(3), r.i64(4), r.i64(5), r.opt_i64(6)};
}

static const char* kRunSelect =
    "SELECT id, checks, state, operator, diff_count, started_at, finished_at FROM reconcile_run ";

std::vector<RunSummary> list_runs(store::Session& s, int64_t limit) {
  auto r = s.query(std::string(kRunSelect) + "ORDER BY id DESC LIMIT $1", {limit});
  std::vector<RunSummary> out;
  for (auto& row : r.rows) out.push_back(to_summary(row));
  return out;
}

std::optional<std::pair<RunSummary, std::vector<Diff>>> show_run(store::Session& s, int64_t run_id) {
  auto r = s.query(std::string(kRunSelect) + "WHERE id = $1", {run_id});
  if (r.empty()) return std::nullopt;
  std::pair<RunSummary, std::vector<Diff>> out{to_summary(r[0]), {}};
  auto d = s.query(
      "SELECT check_name, entity, entity_key, expected, actual, detail FROM reconcile_diff WHERE run_id = $1 ORDER BY id",
      {run_id});
  for (auto& row : d.rows)
    out.second.push_back(
        {row.str(0), row.str(1), row.str(2), row.str_or(3, ""), row.str_or(4, ""), row.str_or(5, "")});
  return out;
}

}  // namespace rc::jobs::reconcile
