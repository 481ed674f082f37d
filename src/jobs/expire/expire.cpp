#include "jobs/expire/expire.hpp"

#include <nlohmann/json.hpp>

#include "core/audit.hpp"

namespace rc::jobs {
namespace {

struct Cursor {
  int64_t due = INT64_MIN, id = 0;
};

// The stock of one prize, summed over its buckets.
struct PrizeStockRow {
  std::string prize;
  int64_t total = 0, left = 0;
};
PrizeStockRow to_prize_stock(const store::Row& r) { return {r.str(0), r.i64(1), r.i64(2)}; }

struct BudgetRow {
  int64_t authorised_cents = 0, consumed_cents = 0;
};
BudgetRow to_budget(const store::Row& r) { return {r.i64(0), r.i64(1)}; }

// The grants of one stored state (the text as stored: a key of the settlement's JSON).
struct GrantStateRow {
  std::string state;
  int64_t count = 0, cost_cents = 0;
};
GrantStateRow to_grant_state(const store::Row& r) { return {r.str(0), r.i64(1), r.i64(2)}; }

// The stock left per prize, the budget, and the grants by state: what an ended activity leaves.
nlohmann::json settlement(store::Session& s, int64_t activity_id) {
  nlohmann::json prizes = nlohmann::json::array();
  auto p = s.query(
      "SELECT p.code, COALESCE(SUM(st.total), 0), COALESCE(SUM(st.remain), 0) FROM prize p "
      "LEFT JOIN stock st ON st.prize_id = p.id WHERE p.activity_id = $1 GROUP BY p.id, p.code ORDER BY p.id",
      {activity_id});
  for (auto& row : p.rows) {
    const PrizeStockRow x = to_prize_stock(row);
    prizes.push_back({{"prize", x.prize}, {"stock_total", x.total}, {"stock_left", x.left}});
  }
  nlohmann::json budget = nullptr;
  auto b = s.query("SELECT authorised_cents, consumed_cents FROM budget WHERE activity_id = $1", {activity_id});
  if (!b.empty()) {
    const BudgetRow x = to_budget(b[0]);
    budget = {{"authorised_cents", x.authorised_cents},
              {"consumed_cents", x.consumed_cents},
              {"left_cents", x.authorised_cents - x.consumed_cents}};
  }
  nlohmann::json grants = nlohmann::json::object();
  auto g = s.query("SELECT state, count(*), COALESCE(SUM(cost_cents), 0) FROM grants WHERE activity_id = $1 GROUP BY state",
                   {activity_id});
  for (auto& row : g.rows) {
    const GrantStateRow x = to_grant_state(row);
    grants[x.state] = {{"count", x.count}, {"cost_cents", x.cost_cents}};
  }
  return {{"prizes", prizes}, {"budget", budget}, {"grants", grants}};
}

// An activity whose window has ended.
struct EndedActivity {
  int64_t id = 0;
  std::string code;
  ActivityState state = ActivityState::live;
  Millis end_at = 0;
};
EndedActivity to_ended(const store::Row& r) {
  return {r.i64(0), r.str(1), state_from_db<ActivityState>(r.str(2)), r.i64(3)};
}

// A row of an expiring table past its expires_at.
struct DueRow {
  int64_t id = 0;
  Millis expires_at = 0;
};
DueRow to_due(const store::Row& r) { return {r.i64(0), r.i64(1)}; }

int64_t activities_chunk(JobRun& run, store::Tx& tx, Counts& c, Cursor& cur, int64_t n, Millis now) {
  // The window is inclusive to its end second (activity/window.hpp): an activity has ended once
  // window_close(end_at) <= now, that is once end_at lies before the start of now's second.
  const Millis now_second = now - ((now % 1000) + 1000) % 1000;
  auto r = tx.query(
      "SELECT id, code, state, end_at FROM activity WHERE state IN ('live', 'paused', 'gray') AND end_at < $1 "
      "AND (end_at > $2 OR (end_at = $2 AND id > $3)) ORDER BY end_at, id LIMIT $4",
      {now_second, cur.due, cur.id, n});
  for (auto& row : r.rows) {
    const EndedActivity a = to_ended(row);
    cur = {a.end_at, a.id};
    if (!transition(tx, a.id, a.state, ActivityState::ended, run.actor(), "window ended at " + format_utc(a.end_at), now))
      continue;  // changed concurrently: whoever changed it owns the outcome
    audit(tx, run.actor(), "activity.settle", "activity", a.code, settlement(tx, a.id).dump(), now);
    ++c["activities_ended"];
  }
  return int64_t(r.size());
}

// Moves the due rows of `table` (at most n, after the cursor) from `from` to `to`: one UPDATE whose
// RETURNING names exactly the rows it changed, and one status-log row for each of those.
int64_t expire_chunk(JobRun& run, store::Tx& tx, const std::string& table, const std::string& entity,
                     const std::string& col, const std::string& from, const std::string& to, Cursor& cur, int64_t n,
                     Millis now, int64_t& changed) {
  auto due = tx.query("SELECT id, expires_at FROM " + table + " WHERE " + col + " = $1 AND expires_at IS NOT NULL AND "
                      "expires_at <= $2 AND (expires_at > $3 OR (expires_at = $3 AND id > $4)) "
                      "ORDER BY expires_at, id LIMIT $5",
                      {from, now, cur.due, cur.id, n});
  if (due.empty()) return 0;
  const DueRow last = to_due(due.rows.back());
  cur = {last.expires_at, last.id};
  store::Params p{to, now, from};
  std::string in;
  for (auto& row : due.rows) {
    p.push_back(to_due(row).id);
    in += (in.empty() ? "$" : ", $") + std::to_string(p.size());
  }
  auto upd = tx.query("UPDATE " + table + " SET " + col + " = $1, updated_at = $2 WHERE " + col + " = $3 AND id IN (" +
                          in + ") RETURNING id",
                      p);
  if (!upd.empty()) {
    store::Params lp{entity, from, to, run.actor(), std::string("past expires_at"), now};
    std::string values;
    for (auto& row : upd.rows) {
      lp.push_back(row.i64(0));  // RETURNING id
      values += std::string(values.empty() ? "" : ", ") + "($1, CAST($" + std::to_string(lp.size()) +
                " AS BIGINT), $2, $3, $4, $5, NULL, CAST($6 AS BIGINT))";
    }
    tx.exec(kStatusLogInsert + "VALUES " + values, lp);
  }
  changed = int64_t(upd.size());
  return int64_t(due.size());
}

}  // namespace

void expire(JobRun& run, const ExpireOptions& o) {
  const Millis now = run.now();
  // activities first: an activity that ends now stops its claims before anything else moves
  // (a retried transaction starts again from the cursor it started with: `next` is kept only
  // once the chunk is over)
  for (const char* k : {"activities_ended", "qualifications_expired", "grants_expired"}) run.add(k, 0);
  Cursor cur, next;
  while (run.more()) {
    int64_t want = run.allowance(o.chunk), seen = 0;
    run.chunk([&](store::Tx& tx, Counts& c) {
      next = cur;
      seen = activities_chunk(run, tx, c, next, want, now);
      return c["activities_ended"];
    });
    cur = next;
    if (seen < want) break;
  }
  struct Phase {
    const char *table, *entity, *col, *from, *to, *count;
  };
  using Q = QualificationStatus;
  using G = GrantState;
  for (const Phase& ph : {Phase{StateMachine<Q>::table, StateMachine<Q>::entity, "status", name(Q::unused),
                                name(Q::expired), "qualifications_expired"},
                          Phase{StateMachine<G>::table, StateMachine<G>::entity, "state", name(G::pending),
                                name(G::expired), "grants_expired"}}) {
    Cursor pc, pnext;
    while (run.more()) {
      int64_t want = run.allowance(o.chunk), seen = 0;
      run.chunk([&](store::Tx& tx, Counts& c) {
        pnext = pc;
        int64_t changed = 0;
        seen = expire_chunk(run, tx, ph.table, ph.entity, ph.col, ph.from, ph.to, pnext, want, now, changed);
        c[ph.count] += changed;
        return changed;
      });
      pc = pnext;
      if (seen < want) break;
    }
  }
}

}  // namespace rc::jobs
