#include "jobs/report/report.hpp"

#include <algorithm>

#include "core/activity/activity.hpp"
#include "core/activity/window.hpp"
#include "core/states.hpp"
#include "core/zone_day.hpp"
#include "jobs/reconcile/reconcile.hpp"

namespace rc::jobs::report {
namespace {

constexpr Millis kMinute = 60'000, kHour = 3'600'000, kDay = 86'400'000;

Millis floor_to(Millis t, Millis unit) {
  Millis q = t / unit;
  if (t % unit < 0) --q;
  return q * unit;
}

// "role:operator" from a (role, operator) row of activity_review.
std::string approval_name(const store::Row& a) { return a.str(0) + ":" + a.str(1); }

Header read_header(store::Tx& tx, const std::string& code, int64_t& id) {
  const auto a = activity::find(tx, code);
  if (!a) throw Error(Errc::not_found, "no activity " + code);
  id = a->id;
  Header h;
  h.code = a->code;
  h.name = a->name;
  h.kind = name(a->kind);
  h.state = name(a->state);
  h.timezone = a->timezone;
  h.definition_hash = a->definition_hash;
  h.created_by = a->created_by;
  h.version = a->version;
  h.start_at = a->start_at;
  h.end_at = a->end_at;
  for (auto& r : tx.query("SELECT role, operator FROM activity_review WHERE activity_id = $1 AND decision = 'approve' "
                          "AND voided = 0 AND definition_hash = $2 ORDER BY id",
                          {id, h.definition_hash})
                     .rows)
    h.approved_by.push_back(approval_name(r));
  return h;
}

// The range and bucket: explicit, or the activity's data (grants, counted rejections, fuse events)
// within its window, in the finest of 1m/1h/1d that keeps the chart under kMaxAutoBuckets bars.
void choose_range(store::Tx& tx, int64_t id, const Header& h, const Options& o, Data& d) {
  auto r = tx.query(
      "SELECT min(t0), max(t1) FROM ("
      "SELECT min(created_at) AS t0, max(created_at) AS t1 FROM grants WHERE activity_id = $1 "
      "UNION ALL SELECT min(minute_at), max(minute_at) FROM claim_reject WHERE activity_id = $1 "
      "UNION ALL SELECT min(created_at), max(created_at) FROM fuse_event WHERE activity_id = $1) x",
      {id});
  const std::optional<Millis> first = r[0].opt_i64(0), last = r[0].opt_i64(1);  // none: no data
  const Millis close = activity::window_close(h.end_at);
  Millis to = o.to ? *o.to : last ? *last + 1 : std::min(close, std::max(o.now, h.start_at + 1));
  Millis from = o.from ? *o.from : first ? *first : h.start_at;
  if (!o.from && from >= to) from = to - 1;
  if (!o.to && to <= from) to = from + 1;
  if (to <= from) throw Error(Errc::usage, "--from must be before --to");
  Millis bucket = o.bucket ? *o.bucket : 0;
  if (!bucket) {
    bucket = kDay;
    for (Millis b : {kMinute, kHour})
      if ((to - floor_to(from, b) + b - 1) / b <= kMaxAutoBuckets) {
        bucket = b;
        break;
      }
  }
  // automatic ranges start on a whole bucket: a minute or an hour (UTC), or midnight in the
  // activity's zone; an explicit --from on a whole minute, the resolution at which rejections are counted
  from = o.from ? floor_to(from, kMinute) : bucket == kDay ? day_start_in_zone(from, h.timezone) : floor_to(from, bucket);
  const std::vector<Millis> edges = bucket_edges(from, to, bucket, h.timezone);
  d.from = from;
  d.to = to;
  d.bucket = bucket;
  d.bucket_zone = bucket == kDay ? h.timezone : "UTC";
  d.series.resize(edges.size() - 1);
  for (size_t i = 0; i + 1 < edges.size(); ++i) {
    d.series[i].at = edges[i];
    d.series[i].end = edges[i + 1];
  }
}

// The series is grouped in the database by `unit` from d.from: the bucket itself when buckets have
// a fixed length, a minute for calendar days (whose lengths vary); each unit then falls in the
// bucket that holds its start.
Millis group_unit(const Data& d) { return d.bucket == kDay ? kMinute : d.bucket; }

Bucket& bucket_at(Data& d, int64_t unit_index) {
  const Millis t = d.from + unit_index * group_unit(d);
  auto it = std::upper_bound(d.series.begin(), d.series.end(), t, [](Millis v, const Bucket& b) { return v < b.at; });
  return *std::prev(it);  // t >= from = series[0].at
}

// The grants of one unit of the series that were held by a fuse, or not.
struct GrantUnitRow {
  int64_t unit = 0;  // index of the unit from d.from
  bool held = false;
  int64_t grants = 0, cost_cents = 0;
};
GrantUnitRow to_grant_unit(const store::Row& x) { return {x.i64(0), x.i64(1) != 0, x.i64(2), x.i64(3)}; }

// The rejections of one reason in one unit of the series.
struct RejectUnitRow {
  int64_t unit = 0;
  std::string reason;
  int64_t n = 0;
};
RejectUnitRow to_reject_unit(const store::Row& x) { return {x.i64(0), x.str(1), x.i64(2)}; }

void read_series(store::Tx& tx, int64_t id, Data& d) {
  const std::string holding = reconcile::kHoldingStates;
  const store::Params range{id, d.from, group_unit(d), d.to};
  for (auto& row : tx.query("SELECT (created_at - CAST($2 AS BIGINT)) / CAST($3 AS BIGINT) AS k, "
                            "CASE WHEN fuse_event_id IS NULL THEN 0 ELSE 1 END AS held, count(*), "
                            "sum(CASE WHEN state IN " + holding + " THEN cost_cents ELSE 0 END) "
                            "FROM grants WHERE activity_id = $1 AND created_at >= $2 AND created_at < $4 "
                            "GROUP BY 1, 2",
                            range)
                       .rows) {
    const GrantUnitRow x = to_grant_unit(row);
    auto& b = bucket_at(d, x.unit);
    (x.held ? b.held : b.granted) += x.grants;
    b.cost_cents += x.cost_cents;
  }
  d.cost_before_cents = tx.query("SELECT coalesce(sum(cost_cents), 0) FROM grants WHERE activity_id = $1 AND "
                                 "created_at < $2 AND state IN " + holding,
                                 {id, d.from})[0]
                            .i64(0);
  std::map<std::string, int64_t> reasons;
  for (auto& row : tx.query("SELECT (minute_at - CAST($2 AS BIGINT)) / CAST($3 AS BIGINT) AS k, reason, sum(n) "
                            "FROM claim_reject WHERE activity_id = $1 AND minute_at >= $2 AND minute_at < $4 "
                            "GROUP BY 1, 2",
                            range)
                       .rows) {
    const RejectUnitRow x = to_reject_unit(row);
    bucket_at(d, x.unit).rejected[x.reason] += x.n;
    reasons[x.reason] += x.n;
  }
  for (auto& b : d.series) {
    d.granted += b.granted;
    d.held += b.held;
    d.rejected += b.rejected_total();
    d.cost_cents += b.cost_cents;
  }
  d.reject_reasons.assign(reasons.begin(), reasons.end());
  std::stable_sort(d.reject_reasons.begin(), d.reject_reasons.end(),
                   [](auto& a, auto& b) { return a.second > b.second; });
}

// A prize and one of its stock buckets (none: the prize has no stock rows).
struct StockRow {
  std::string prize;
  int64_t configured = 0;  // prize.stock_total
  std::optional<int64_t> bucket;
  int64_t total = 0, remain = 0;  // the bucket's
};
StockRow to_stock(const store::Row& x) {
  StockRow s{x.str(0), x.i64(1), x.opt_i64(2), 0, 0};
  if (s.bucket) {
    s.total = x.i64(3);
    s.remain = x.i64(4);
  }
  return s;
}

// (state, count) rows of a GROUP BY state, as the report shows them.
std::vector<std::pair<std::string, int64_t>> state_counts(store::Tx& tx, const std::string& sql, int64_t id) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (auto& x : tx.query(sql, {id}).rows) out.emplace_back(x.str(0), x.i64(1));
  return out;
}

// The open resend bills of one state, and how many of them are past their next attempt.
struct ResendCountRow {
  ResendState state = ResendState::pending;
  int64_t bills = 0, overdue = 0;
};
ResendCountRow to_resend_count(const store::Row& x) {
  return {state_from_db<ResendState>(x.str(0)), x.i64(1), x.i64(2)};
}

void read_books(store::Tx& tx, int64_t id, Millis now, Data& d) {
  auto b = tx.query("SELECT authorised_cents, consumed_cents FROM budget WHERE activity_id = $1", {id});
  if (!b.empty()) {
    d.authorised_cents = b[0].i64(0);
    d.consumed_cents = b[0].i64(1);
  }
  for (auto& row : tx.query("SELECT p.code, p.stock_total, s.bucket, s.total, s.remain FROM prize p "
                            "LEFT JOIN stock s ON s.prize_id = p.id WHERE p.activity_id = $1 ORDER BY p.id, s.bucket",
                            {id})
                       .rows) {
    const StockRow x = to_stock(row);
    if (d.stock.empty() || d.stock.back().code != x.prize) {
      d.stock.emplace_back();
      d.stock.back().code = x.prize;
      d.stock.back().configured = x.configured;
    }
    auto& p = d.stock.back();
    if (!x.bucket) continue;
    p.total += x.total;
    p.remain += x.remain;
    p.buckets.emplace_back(*x.bucket, x.remain);
  }
  d.grant_states =
      state_counts(tx, "SELECT state, count(*) FROM grants WHERE activity_id = $1 GROUP BY state ORDER BY state", id);
  d.bill_states = state_counts(tx,
                               "SELECT b.state, count(*) FROM delivery_bill b JOIN grants g ON g.id = b.grant_id "
                               "WHERE g.activity_id = $1 GROUP BY b.state ORDER BY b.state",
                               id);
  for (auto& row : tx.query("SELECT r.state, count(*), sum(CASE WHEN r.next_attempt_at < $2 THEN 1 ELSE 0 END) "
                            "FROM resend_bill r JOIN grants g ON g.id = r.grant_id WHERE g.activity_id = $1 "
                            "AND r.state <> 'done' GROUP BY r.state",
                            {id, now})
                       .rows) {
    const ResendCountRow x = to_resend_count(row);
    if (x.state == ResendState::pending) {
      d.resend_pending = x.bills;
      d.resend_overdue = x.overdue;
    } else {
      d.resend_manual += x.bills;
    }
  }
}

FuseMark to_fuse_mark(const store::Row& x) {
  FuseMark m;
  m.batch_no = x.str(0);
  m.kind = x.str(1);
  m.state = x.str(2);
  m.reason = x.str(3);
  m.prize = x.str(4);
  m.at = x.i64(5);
  m.observed_count = x.i64(6);
  m.observed_amount = x.i64(7);
  return m;
}

// The last reconcile run, without its diffs of this activity.
ReconcileMark to_reconcile_mark(const store::Row& x) {
  ReconcileMark m;
  m.run = x.i64(0);
  m.state = x.str(1);
  m.checks = x.str(2);
  m.diffs_all = x.i64(3);
  m.started_at = x.i64(4);
  return m;
}

void read_marks(store::Tx& tx, int64_t id, const std::string& code, Data& d) {
  for (auto& x : tx.query("SELECT e.batch_no, coalesce(e.kind, 'manual'), e.state, e.reason, coalesce(p.code, ''), "
                          "e.created_at, e.observed_count, e.observed_amount FROM fuse_event e "
                          "LEFT JOIN prize p ON p.id = e.prize_id WHERE e.activity_id = $1 ORDER BY e.created_at, e.id",
                          {id})
                     .rows)
    d.fuse.push_back(to_fuse_mark(x));
  auto r = tx.query("SELECT id, state, checks, diff_count, started_at FROM reconcile_run ORDER BY id DESC LIMIT 1");
  if (r.empty()) return;
  ReconcileMark m = to_reconcile_mark(r[0]);
  m.diffs_here = tx.query("SELECT count(*) FROM reconcile_diff WHERE run_id = $1 AND (entity_key = $2 OR "
                          "substr(entity_key, 1, length(CAST($2 AS TEXT)) + 1) = CAST($2 AS TEXT) || '/')",
                          {m.run, code})[0]
                     .i64(0);
  d.reconcile = m;
}

}  // namespace

int64_t Bucket::rejected_total() const {
  int64_t n = 0;
  for (auto& [_, c] : rejected) n += c;
  return n;
}

Data collect(store::Store& st, const Options& o) {
  Data d;
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    d = Data{};
    int64_t id = 0;
    d.h = read_header(tx, o.activity, id);
    choose_range(tx, id, d.h, o, d);
    read_series(tx, id, d);
    read_books(tx, id, o.now, d);
    read_marks(tx, id, d.h.code, d);
  });
  return d;
}

std::vector<std::string> activity_codes(store::Store& st) {
  std::vector<std::string> out;
  for (auto& x : st.query("SELECT code FROM activity ORDER BY id").rows) out.push_back(x.str(0));
  return out;
}

std::vector<Millis> bucket_edges(Millis from, Millis to, Millis bucket, const std::string& zone) {
  auto too_many = [&](int64_t n) {
    return Error(Errc::usage, "--bucket " + bucket_name(bucket) + " over this range gives " + std::to_string(n) +
                                  " buckets (at most " + std::to_string(kMaxBuckets) +
                                  "): choose a wider --bucket or a shorter --from/--to");
  };
  std::vector<Millis> e{from};
  if (bucket != kDay) {
    const int64_t n = (to - from + bucket - 1) / bucket;
    if (n > kMaxBuckets) throw too_many(n);
    for (int64_t i = 1; i <= n; ++i) e.push_back(from + i * bucket);
    return e;
  }
  // no day of any zone is longer than 26 hours: a range of more than kMaxBuckets such days is too
  // many without computing each midnight
  if ((to - from) / (26 * kHour) > kMaxBuckets) throw too_many((to - from + kDay - 1) / kDay);
  while (e.back() < to) {
    Millis n = next_day_start_in_zone(e.back(), zone);
    // from in an hour a fall-back repeats just before midnight: the next day began earlier
    while (n <= e.back()) n = next_day_start_in_zone(n, zone);
    e.push_back(n);
  }
  if (int64_t(e.size()) - 1 > kMaxBuckets) throw too_many(int64_t(e.size()) - 1);
  return e;
}

Millis parse_bucket(const std::string& s) {
  if (s == "1m") return kMinute;
  if (s == "1h") return kHour;
  if (s == "1d") return kDay;
  throw Error(Errc::usage, "--bucket: expected 1m, 1h or 1d, got '" + s.substr(0, 40) + "'");
}

std::string bucket_name(Millis b) { return b == kMinute ? "1m" : b == kHour ? "1h" : b == kDay ? "1d" : std::to_string(b) + "ms"; }

}  // namespace rc::jobs::report
