// reconcile: runs the checks of reconcile_checks.cpp on one snapshot and keeps the result.
#include "jobs/reconcile/reconcile.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/activity/definition.hpp"
#include "core/identifier.hpp"
#include "jobs/reconcile/checks.hpp"

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
    if (v == values.end()) throw Error(Errc::internal, "reconcile: no value for parameter :" + name);
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
      throw Error(Errc::usage, "--checks: unknown check '" + n + "' (known: " + list + ")");
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

// A connection of a run whose checks are side by side (PostgreSQL): its queries get no parallel
// workers. The connections are the run's parallelism already (as many as the server gives one
// query, connections_for); a worker is a new process each time, which first has to map every
// shared-buffer page it reads, and would only take a core from another connection's check.
void side_by_side(store::Tx& tx) { tx.exec_script("SET LOCAL max_parallel_workers_per_gather = 0"); }

// The checks of one run, shared by the connections that perform them: each check's queries (its
// fingerprints when the run uses them, its sql, then its more_sql), taken in the table's order, or
// side by side heaviest first (the weights; then the table's order). `more` is asked under the lock
// before each check's first query: false skips that check and every one not yet begun, while the
// other queries of a begun check are still performed (a check is performed whole or not at all).
// A check's own queries wait for its fingerprints (a connection that finds nothing else to take
// waits for them to finish): when they all agree, those queries are not performed and the check
// is proven; otherwise they are. A failure stops the taking and is rethrown once all have finished.
struct Queue {
  struct Item {
    size_t check;  // index in todo
    size_t part;   // fingerprint: its index in pg_fingerprints; else 0: the check's sql, i: more_sql[i - 1]
    bool fingerprint;
  };
  std::vector<const Check*> todo;        // the selected checks, in the table's order
  std::vector<Item> items;               // their queries, in the table's order
  std::vector<size_t> order;             // indexes in items, in the order they are taken
  std::vector<std::vector<Diff>> diffs;  // per item, filled by the connection that ran it
  std::vector<double> seconds;           // per item
  std::vector<char> ran;                 // per item: performed, or not needed (its check proven)
  std::vector<char> taken;               // per item
  std::vector<char> begun;               // per check: its first query was taken
  std::vector<size_t> prints_left;       // per check: fingerprints not yet finished
  std::vector<char> fingerprinted;       // per check: its own queries wait for its fingerprints
  std::vector<char> disagreed;           // per check: a fingerprint did not agree
  bool stopped = false;                  // `more` said stop: no check begins any more
  std::exception_ptr error;
  std::mutex mu;
  std::condition_variable changed;

  Queue(std::vector<const Check*> checks, bool fingerprints) : todo(std::move(checks)) {
    prints_left.assign(todo.size(), 0);
    fingerprinted.assign(todo.size(), 0);
    disagreed.assign(todo.size(), 0);
    for (size_t c = 0; c < todo.size(); ++c) {
      if (fingerprints && !todo[c]->pg_fingerprints.empty()) {
        fingerprinted[c] = 1;
        prints_left[c] = todo[c]->pg_fingerprints.size();
        for (size_t f = 0; f < todo[c]->pg_fingerprints.size(); ++f) items.push_back({c, f, true});
      }
      for (size_t p = 0; p <= todo[c]->more_sql.size(); ++p) items.push_back({c, p, false});
    }
    for (size_t i = 0; i < items.size(); ++i) order.push_back(i);
    diffs.resize(items.size());
    seconds.assign(items.size(), 0);
    ran.assign(items.size(), 0);
    taken.assign(items.size(), 0);
    begun.assign(todo.size(), 0);
  }
  void heaviest_first() {
    std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) { return weight(a) > weight(b); });
  }
  int weight(size_t item) const {
    const Item& it = items[item];
    if (it.fingerprint) return todo[it.check]->pg_fingerprints[it.part].weight;
    return it.part ? 0 : todo[it.check]->weight;
  }
  // The next query to perform (its index in items), or false: none left, or failed.
  bool take(const Options& o, size_t& slot) {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      bool waiting = false;
      for (size_t i = 0; i < order.size() && !error; ++i) {
        const size_t n = order[i];
        const Item& it = items[n];
        if (taken[n]) continue;
        if (!begun[it.check]) {
          if (!stopped && o.more && !o.more()) stopped = true;
          if (stopped) {
            taken[n] = 1;  // (not ran: the check is reported skipped)
            continue;
          }
          begun[it.check] = 1;
        }
        if (!it.fingerprint && fingerprinted[it.check]) {
          if (prints_left[it.check]) {
            waiting = true;
            continue;
          }
          if (!disagreed[it.check]) {  // proven by its fingerprints: not needed
            taken[n] = ran[n] = 1;
            continue;
          }
        }
        taken[n] = 1;
        slot = n;
        return true;
      }
      if (error || !waiting) return false;
      changed.wait(l);
    }
  }
  void fingerprint_done(size_t item, bool agreed) {
    {
      std::lock_guard<std::mutex> l(mu);
      const size_t c = items[item].check;
      --prints_left[c];
      if (!agreed) disagreed[c] = 1;
    }
    changed.notify_all();
  }
  void fail(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (!error) error = e;
    }
    changed.notify_all();
  }
};

// A diff from a row of a check's query: (entity, key, expected, actual, detail, at), every check
// returns these columns (reconcile_checks.hpp); `at` (a time, may be null) ends the detail.
Diff to_check_diff(const std::string& check, const store::Row& row) {
  Diff d{check, row.str(0), row.str(1), row.str_or(2, ""), row.str_or(3, ""), row.str_or(4, "")};
  if (!row.is_null(5)) d.detail += (d.detail.empty() ? "" : " ") + format_utc(row.i64(5));
  return d;
}

// Performs queries from the queue in tx until none is left. Never throws: a failure goes to the
// queue (a transaction retried by its store must not lose a query it had taken).
void perform(store::Tx& tx, Queue& q, const Options& o, const std::map<std::string, store::Value>& values) {
  try {
    size_t slot = 0;
    while (q.take(o, slot)) {
      const Check& c = *q.todo[q.items[slot].check];
      const size_t part = q.items[slot].part;
      auto t0 = std::chrono::steady_clock::now();
      if (q.items[slot].fingerprint) {
        auto [sql, params] = bind_named(c.pg_fingerprints[part].sql, values);
        auto r = tx.query(sql, params);
        bool agreed = !r.empty();
        for (auto& row : r.rows) {
          const bool same = !row.is_null(1) && !row.is_null(2) && row.str(1) == row.str(2);
          agreed = agreed && same;
          spdlog::debug("reconcile check {} fingerprint {}: {} ({} / {})", c.info.name, row.str_or(0, ""),
                        same ? "agrees" : "differs", row.str_or(1, "NULL"), row.str_or(2, "NULL"));
        }
        q.seconds[slot] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        q.ran[slot] = 1;
        q.fingerprint_done(slot, agreed);
        continue;
      }
      const bool own = tx.dialect() == store::Dialect::sqlite && !c.sqlite_sql.empty();
      auto [sql, params] = bind_named(part ? c.more_sql[part - 1] : own ? c.sqlite_sql : c.sql, values);
      spdlog::trace("reconcile check {} ({}): {}", c.info.name, part, sql);
      // (set_config(..., true) is SET LOCAL: it ends with the transaction, and the value the
      // transaction had before is put back after the query)
      std::vector<std::string> saved;
      const bool tuned = part == 0 && tx.dialect() == store::Dialect::postgres && !c.pg_settings.empty();
      if (tuned)
        for (auto& [name, value] : c.pg_settings)
          saved.push_back(tx.query("SELECT current_setting($1), set_config($1, $2, true)", {name, value})[0].str(0));
      auto r = tx.query(sql, params);
      if (tuned)
        for (size_t i = 0; i < c.pg_settings.size(); ++i)
          tx.query("SELECT set_config($1, $2, true)", {c.pg_settings[i].first, saved[i]});
      auto& out = q.diffs[slot];
      for (auto& row : r.rows) out.push_back(to_check_diff(c.info.name, row));
      q.seconds[slot] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      q.ran[slot] = 1;
      spdlog::debug("reconcile check {} ({}): {} diff(s) in {:.3f} s", c.info.name, part, r.size(), q.seconds[slot]);
    }
  } catch (...) {
    q.fail(std::current_exception());
  }
}

// The terms each grant was made under (checks.cpp, :terms and :aterms). The running version's are
// the rows the engine reads when it claims (prize, item, activity: a version switch rewrites them,
// docs/design.md §12.1), also as version 0 (grants made before schema v6 carry none); an older
// version's (superseded) are read from that version's definition. A superseded definition that no
// longer parses gives no terms: its grants are reported, never passed.
std::pair<std::string, std::string> grant_terms(store::Tx& tx, const Options& o) {
  using nlohmann::json;
  json terms = json::array(), aterms = json::array();
  auto period_or_null = [](const store::Row& r, size_t limit, size_t period) {
    return r.is_null(limit) || r.is_null(period) ? json(nullptr) : json(r.str(period));
  };
  std::map<std::pair<int64_t, std::string>, int64_t> prize_ids;  // (activity id, prize code) -> id
  for (auto& r : tx.query("SELECT a.id, a.version, a.user_limit, a.user_limit_period FROM activity a WHERE "
                          "CAST($1 AS TEXT) IS NULL OR a.code = $1",
                          {store::opt(o.activity)})
                     .rows) {
    for (int64_t v : {r.i64(1), int64_t(0)}) aterms.push_back({{"a", r.i64(0)}, {"v", v}, {"ap", period_or_null(r, 2, 3)}});
  }
  for (auto& r : tx.query("SELECT p.activity_id, p.code, p.id, a.version, p.amount, p.amount_max, i.unit_cost_cents, "
                          "i.channel, p.user_limit, p.user_limit_period, a.kind FROM prize p JOIN activity a ON a.id = "
                          "p.activity_id JOIN item i ON i.id = p.item_id WHERE CAST($1 AS TEXT) IS NULL OR a.code = $1",
                          {store::opt(o.activity)})
                     .rows) {
    prize_ids[{r.i64(0), r.str(1)}] = r.i64(2);
    const int64_t hi = r.str(10) == "redpack" && !r.is_null(5) ? r.i64(5) : r.i64(4);
    for (int64_t v : {r.i64(3), int64_t(0)})
      terms.push_back({{"p", r.i64(2)}, {"v", v}, {"lo", r.i64(4)}, {"hi", hi}, {"u", r.i64(6)}, {"ch", r.str(7)},
                       {"pp", period_or_null(r, 8, 9)}});
  }
  auto rows = tx.query(
      "SELECT v.activity_id, v.version, v.definition FROM activity_version v JOIN activity a ON a.id = v.activity_id "
      "WHERE (CAST($1 AS TEXT) IS NULL OR a.code = $1) AND v.state = 'superseded' AND v.version <> a.version "
      "ORDER BY v.activity_id, v.version",
      {store::opt(o.activity)});
  for (auto& r : rows.rows) {
    const int64_t aid = r.i64(0), v = r.i64(1);
    auto parsed = activity::parse_definition(r.str(2), "activity_version " + std::to_string(v));
    if (!parsed.def) {
      spdlog::warn("reconcile: version {} of activity id {} does not parse: its grants have no terms", v, aid);
      continue;
    }
    const auto& d = *parsed.def;
    aterms.push_back({{"a", aid}, {"v", v}, {"ap", d.limit ? json(period_name(d.limit->period)) : json(nullptr)}});
    for (auto& p : d.prizes) {
      auto id = prize_ids.find({aid, p.code});
      const auto* item = d.item(p.item);
      if (id == prize_ids.end() || !item) continue;
      const int64_t hi = d.kind == activity::Kind::redpack && p.amount_max ? *p.amount_max : p.amount;
      terms.push_back({{"p", id->second}, {"v", v}, {"lo", p.amount}, {"hi", hi}, {"u", item->unit_cost_cents},
                       {"ch", item->channel}, {"pp", p.limit ? json(period_name(p.limit->period)) : json(nullptr)}});
    }
  }
  return {terms.dump(), aterms.dump()};
}

// A PostgreSQL regular expression matching any code point the identifier rules refuse
// (core/identifier.hpp, the edges' own table): one bracket of \U ranges (NUL left out: a text
// holds none).
std::string refused_class() {
  std::string re = "[";
  char buf[40];
  for (auto [lo, hi] : refused_code_point_ranges()) {
    const uint32_t a = std::max<uint32_t>(uint32_t(lo), 1), b = uint32_t(hi);
    if (b < a) continue;
    std::snprintf(buf, sizeof buf, "\\U%08X-\\U%08X", a, b);
    re += buf;
  }
  return re + "]";
}

std::string join_list(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

bool uses_fingerprints(store::Session& s, const Options& o) {
  return s.dialect() == store::Dialect::postgres && !o.activity && !o.exact;
}

int connections_for(store::Session& s, const Options& o, size_t checks) {
  if (s.dialect() != store::Dialect::postgres || checks < 2) return 1;
  if (o.connections > 0) return std::min<int>(o.connections, int(checks));
  auto r = s.query("SELECT CAST(coalesce(max(c.reltuples), 0) AS BIGINT), CAST(current_setting("
                   "'max_parallel_workers_per_gather') AS BIGINT) FROM pg_class c WHERE c.oid = to_regclass('grants')");
  const int64_t grants_estimate = r[0].i64(0), parallel_workers = r[0].i64(1);
  if (grants_estimate < kSideBySideFrom) return 1;
  return int(std::clamp<int64_t>(1 + parallel_workers, 1, std::min<int64_t>(kMostConnections, int64_t(checks))));
}

std::vector<Diff> find_diffs(store::Store& st, const Options& o, Millis now,
                             std::vector<std::pair<std::string, double>>* seconds,
                             std::vector<std::string>* skipped, std::vector<std::string>* proven) {
  const auto names = resolve_checks(o.checks);
  std::map<std::string, store::Value> values{
      {"activity", store::opt(o.activity)},
      {"stuck", now - o.stuck_after_ms},
      {"held", now - o.held_after_ms},
      {"ledger", join_list(o.ledger_channels)},
      {"outbox", join_list(o.outbox_channels)},
      {"refused", refused_class()},
  };
  std::vector<Diff> diffs;
  // One snapshot: every check reads it (PostgreSQL: REPEATABLE READ). A second connection, when
  // there is one, imports the same snapshot (pg_export_snapshot / SET TRANSACTION SNAPSHOT) while
  // this transaction, which exported it, stays open until every check has finished.
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    diffs.clear();
    if (seconds) seconds->clear();
    if (skipped) skipped->clear();
    if (proven) proven->clear();
    tune_read(tx);
    if (o.activity && tx.query("SELECT 1 FROM activity WHERE code = $1", {*o.activity}).empty())
      throw Error(Errc::not_found, "--activity: no activity '" + *o.activity + "'");
    auto [terms, aterms] = grant_terms(tx, o);  // (read in the run's snapshot)
    values["terms"] = terms;
    values["aterms"] = aterms;
    std::vector<const Check*> todo;
    for (auto& c : check_table())
      if (std::find(names.begin(), names.end(), c.info.name) != names.end()) todo.push_back(&c);
    Queue q(std::move(todo), uses_fingerprints(tx, o));
    const int n = connections_for(tx, o, q.items.size());
    std::vector<store::Store*> companions;  // (opened here, on this thread, before any other starts)
    for (int i = 1; i < n; ++i)
      if (auto* c = st.companion(size_t(i - 1))) companions.push_back(c);
    std::string snapshot;
    if (!companions.empty()) {
      snapshot = tx.query("SELECT pg_export_snapshot()")[0].str(0);
      // (a utility statement takes no parameter: the identifier is checked to be what PostgreSQL
      // makes, hexadecimal groups joined by dashes, before it is quoted into the text)
      if (snapshot.empty() || snapshot.find_first_not_of("0123456789ABCDEFabcdef-") != std::string::npos)
        throw Error(Errc::internal, "reconcile: unexpected snapshot identifier '" + snapshot + "'");
    }
    if (!companions.empty()) {
      side_by_side(tx);
      q.heaviest_first();
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
            side_by_side(t);
            perform(t, q, o, values);
          });
        } catch (...) {
          q.fail(std::current_exception());
        }
      });
    perform(tx, q, o, values);
    for (auto& t : others.threads) t.join();
    if (q.error) std::rethrow_exception(q.error);
    for (size_t i = 0; i < q.items.size();) {  // per check: its queries' rows in order
      const size_t check = q.items[i].check;
      double sec = 0;
      bool ran = true;
      for (; i < q.items.size() && q.items[i].check == check; ++i) {
        ran = ran && q.ran[i];
        sec += q.seconds[i];
        for (auto& d : q.diffs[i]) diffs.push_back(std::move(d));
      }
      if (!ran) {
        if (skipped) skipped->push_back(q.todo[check]->info.name);
        continue;
      }
      if (seconds) seconds->emplace_back(q.todo[check]->info.name, sec);
      if (proven && q.fingerprinted[check] && !q.disagreed[check]) proven->push_back(q.todo[check]->info.name);
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
    rep.diffs = find_diffs(o.snapshot_store ? *o.snapshot_store : st, o, rep.started_at, nullptr, &rep.skipped,
                           &rep.fingerprinted);
  } catch (...) {
    store::SignalsSpare spare(st);  // (the record of the run: see Store::cancel_on_signal)
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
  // The checks are over (a signal skipped the rest of them): a cancel sent for the last one's query
  // must not stop the record of the run (Store::cancel_on_signal).
  store::SignalsSpare spare(st);
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

// A reconcile_diff row as the query of show_run reads it.
static Diff to_stored_diff(const store::Row& row) {
  return {row.str(0), row.str(1), row.str(2), row.str_or(3, ""), row.str_or(4, ""), row.str_or(5, "")};
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
  for (auto& row : d.rows) out.second.push_back(to_stored_diff(row));
  return out;
}

}  // namespace rc::jobs::reconcile
