// reconcile: runs the checks of reconcile_checks.cpp on one snapshot and keeps the result.
#include "jobs/reconcile.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <set>

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
  // One read transaction: every check sees the same snapshot (PostgreSQL: REPEATABLE READ).
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    diffs.clear();
    if (seconds) seconds->clear();
    if (skipped) skipped->clear();
    bool stop = false;
    tune_read(tx);
    if (o.activity && tx.query("SELECT 1 FROM activity WHERE code = $1", {*o.activity}).empty())
      throw Error(Exit::not_found, "--activity: no activity '" + *o.activity + "'");
    for (auto& c : check_table()) {
      if (std::find(names.begin(), names.end(), c.info.name) == names.end()) continue;
      if (stop || (o.more && !o.more())) {
        stop = true;
        if (skipped) skipped->push_back(c.info.name);
        continue;
      }
      auto t0 = std::chrono::steady_clock::now();
      const bool own = tx.dialect() == store::Dialect::sqlite && !c.sqlite_sql.empty();
      auto [sql, params] = bind_named(own ? c.sqlite_sql : c.sql, values);
      spdlog::trace("reconcile check {}: {}", c.info.name, sql);
      auto r = tx.query(sql, params);
      for (auto& row : r.rows) {
        Diff d{c.info.name, row.str(0), row.str(1), row.str_or(2, ""), row.str_or(3, ""), row.str_or(4, "")};
        if (!row.is_null(5)) d.detail += (d.detail.empty() ? "" : " ") + format_utc(row.i64(5));
        diffs.push_back(std::move(d));
      }
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (seconds) seconds->emplace_back(c.info.name, took);
      spdlog::debug("reconcile check {}: {} diff(s) in {:.3f} s", c.info.name, r.size(), took);
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
