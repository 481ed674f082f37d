#pragma once
// report: the figures of one activity at a glance (docs/design.md §6.9) — issuance over time by outcome,
// budget burn, stock per prize and bucket, reject reasons, delivery states and the resend backlog,
// fuse events and the last reconcile run.
//
// collect() reads them in one read transaction (one snapshot: the stock and the grants agree), each
// series a GROUP BY in the database, never a loop over grants in C++. The HTML page
// (report_html.hpp) and `report -o json` are two views of the same Data, so the numbers a person
// reads in the page's tables are exactly the JSON's.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::jobs::report {

struct Options {
  std::string activity;           // the activity's code
  std::optional<Millis> from, to; // the range [from, to); default: the activity's data within its window
  std::optional<Millis> bucket;   // bucket width; default: 1m, 1h or 1d, the finest giving <= kMaxAutoBuckets
                                  // (1d: a calendar day in the activity's zone, see bucket_edges)
  Millis now = 0;
};

constexpr int64_t kMaxAutoBuckets = 240;
constexpr int64_t kMaxBuckets = 20000;  // more is refused (usage): choose a wider --bucket or a range

struct Header {
  std::string code, name, kind, state, timezone, definition_hash, created_by;
  int64_t version = 0;
  Millis start_at = 0, end_at = 0;         // end_at: the last millisecond of the window's end second
  std::vector<std::string> approved_by;    // "role:operator" of the current, not voided approvals
};

// One bucket of the timeline [at, end): requests by their outcome at the time of the request.
struct Bucket {
  Millis at = 0, end = 0;
  int64_t granted = 0;                      // grants created (not held)
  int64_t held = 0;                         // requests held by a fuse (pending grants naming an event)
  std::map<std::string, int64_t> rejected;  // reason -> rejected claims (claim_reject)
  int64_t cost_cents = 0;                   // cost of the grants created here that hold budget now
  int64_t rejected_total() const;
};

struct PrizeStock {
  std::string code;
  int64_t configured = 0, total = 0, remain = 0;  // prize.stock_total; sum of buckets' total, remain
  std::vector<std::pair<int64_t, int64_t>> buckets;  // (bucket, remain)
};

struct FuseMark {
  std::string batch_no, kind, state, reason, prize;  // prize empty: the whole activity
  Millis at = 0;
  int64_t observed_count = 0, observed_amount = 0;
};

struct ReconcileMark {
  int64_t run = 0, diffs_here = 0, diffs_all = 0;  // diffs_here: the ones naming this activity
  std::string state, checks;
  Millis started_at = 0;
};

struct Data {
  Header h;
  Millis from = 0, to = 0, bucket = 60000;
  std::string bucket_zone = "UTC";  // 1d: the activity's zone, whose midnights start the buckets; else "UTC"
  std::vector<Bucket> series;
  std::optional<int64_t> authorised_cents, consumed_cents;  // no [budget]: none
  std::vector<PrizeStock> stock;
  std::vector<std::pair<std::string, int64_t>> reject_reasons;  // over the range, most first
  std::vector<std::pair<std::string, int64_t>> grant_states;    // every grant of the activity
  std::vector<std::pair<std::string, int64_t>> bill_states;     // delivery bills of its grants
  int64_t resend_pending = 0, resend_overdue = 0, resend_manual = 0;
  std::vector<FuseMark> fuse;
  std::optional<ReconcileMark> reconcile;
  // totals over the range
  int64_t granted = 0, held = 0, rejected = 0, cost_cents = 0;
  int64_t cost_before_cents = 0;  // cost of the grants holding budget that were made before the range
};

// Reads the report of o.activity. Error(not_found) when there is no such activity, Error(usage) for
// a range that is empty or would need more than kMaxBuckets buckets.
Data collect(store::Store& st, const Options& o);

// The codes of every activity, oldest first (report's index page).
std::vector<std::string> activity_codes(store::Store& st);

// The edges of the buckets over [from, to): from, then every `bucket` after it for 1m and 1h (fixed
// length), or for 1d every midnight in `zone` after from (calendar days, by the core's
// next_day_start_in_zone: 23 or 25 hours on a DST change); the last edge is the first at or after
// to. Error(usage) naming --bucket when that is more than kMaxBuckets buckets.
std::vector<Millis> bucket_edges(Millis from, Millis to, Millis bucket, const std::string& zone);

// "1m", "1h", "1d" -> milliseconds; Error(usage) naming --bucket otherwise.
Millis parse_bucket(const std::string& s);
std::string bucket_name(Millis b);

}  // namespace rc::jobs::report
