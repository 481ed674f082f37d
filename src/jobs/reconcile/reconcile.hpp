#pragma once
// reconcile: proof after the fact that every cent and every unit is accounted for (DESIGN §6).
//
// Each named check is ONE set-based query (the ledger check two) over the whole database (or one
// activity), never a loop over rows in C++: the database does the joins and the arithmetic, so a full run costs a few
// scans of each table however many grants there are. All checks of a run read one snapshot (one
// read transaction), so claims committing meanwhile never show up as half-done differences.
// A run is stored (reconcile_run + one reconcile_diff row per difference) so that the differences
// stay inspectable (`reconcile show RUN`) after the terminal scrolled away.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::jobs::reconcile {

// One difference between what the books say and what they should say.
struct Diff {
  std::string check;     // the check that found it: stock, budget, ledger, ...
  std::string entity;    // what is wrong: prize, activity, grant, ledger_entry, ledger_account, ...
  std::string key;       // which one, in operator terms: "act/p1", a record code, a bill number, "user/asset"
  std::string expected;  // what the invariant says it should be
  std::string actual;    // what the database holds
  std::string detail;    // the figures behind it, for a person
};

struct CheckInfo {
  const char* name;
  const char* summary;
  bool fingerprints = false;  // has fingerprints (uses_fingerprints)
};
// Every check, in the order a run performs them.
const std::vector<CheckInfo>& checks();

// The grant states that hold stock, budget and a limit count. Everything else (pending held
// requests, reversed, failed, invalid, expired, cancelled) holds nothing: it never took or has
// given back what it took. SQL list text, e.g. "('init', 'issuing', ...)".
extern const char* const kHoldingStates;

struct Options {
  std::optional<std::string> activity;  // only this activity (code); ledger accounts of its users
  std::vector<std::string> checks;      // empty: all
  int64_t stuck_after_ms = 3'600'000;   // issuing/init/awaiting_external older than this is stuck
  int64_t held_after_ms = 86'400'000;   // a request held by a fuse longer than this is stuck
  std::vector<std::string> ledger_channels{"ledger"};  // channels of type ledger (config [channels.*])
  std::vector<std::string> outbox_channels{"outbox"};  // channels of type outbox (config [channels.*])
  std::string operator_name = "rewardctl";
  bool dry_run = false;                 // run the checks, store nothing (run id 0)
  // Asked before each check begins: false skips it and every check not yet begun (the job runner's
  // --limit, --max-runtime and signals; a begun check is performed whole, its queries never cut
  // short by this). Empty: all run.
  // Called from the thread of the connection that takes the check, one call at a time.
  std::function<bool()> more;
  // PostgreSQL: how many connections perform the checks side by side, all reading the run's one
  // snapshot (0: chosen by connections_for). SQLite: always one.
  int connections = 0;
  // Perform every check's own queries, never its fingerprints (Check::pg_fingerprints: a run over
  // all activities on PostgreSQL first sums hashes of both sides of each heavy check, and performs
  // the check's queries only when the sums differ).
  bool exact = false;
  // Where run() reads its one snapshot: a hot standby of the database (db.read_url; the checks
  // need only a consistent snapshot, and a standby's is one: it replays whole transactions), while
  // the run and its diffs are recorded on the store run() is given. Null: that store.
  store::Store* snapshot_store = nullptr;
};

struct Report {
  int64_t run_id = 0;  // 0 for a dry run
  std::vector<std::string> checks;
  std::optional<std::string> activity;
  std::vector<Diff> diffs;
  Millis started_at = 0, finished_at = 0;
  double seconds = 0;
  bool dry_run = false;
  std::vector<std::string> skipped;  // checks not run because `more` said stop: the run is incomplete
  std::vector<std::string> fingerprinted;  // checks proven by their fingerprints (their queries not needed)
  bool clean() const { return diffs.empty() && skipped.empty(); }
};

// Validates the check names: Error(usage) naming an unknown one and listing the known ones.
std::vector<std::string> resolve_checks(const std::vector<std::string>& names);

// The settings a reconcile gives its read transaction before the first check: memory for the
// checks' sorts and hashes (PostgreSQL work_mem for the transaction; SQLite page cache for the
// connection) and, on PostgreSQL, no JIT compilation (for queries of a second or less it costs
// more than it saves: about 0.1 s per large query, decided on cost estimates that grow with the
// tables). bench/reconcile gives its baseline aggregates the same, so that the ratio compares
// like with like.
void tune_read(store::Tx& tx);

// How many connections perform a run's checks side by side, all reading its one snapshot:
// o.connections when given (at most one per check); SQLite: one. PostgreSQL otherwise: one for a
// small database (fewer than kSideBySideFrom grants by the planner's statistics: another
// connection costs a few milliseconds to open, more than such checks take), else as many
// processes as the server gives one query of its own (1 + max_parallel_workers_per_gather, as
// bench/reconcile's aggregates get), at most kMostConnections.
constexpr int64_t kSideBySideFrom = 50'000;
constexpr int64_t kMostConnections = 3;
int connections_for(store::Session& s, const Options& o, size_t checks);

// Whether a run sums fingerprints before the heavy checks' own queries (Check::pg_fingerprints):
// on PostgreSQL, over all activities, unless o.exact. The sums are of hashes (hashtextextended)
// of every row on both sides of an invariant, one pass over each table and no join: agreeing sums
// prove the check's books but for a chance of about one in 2^64 per part (for damage that was not
// searched for to cancel: design §6.4); when they differ, the check's
// own queries run and report every difference as without them.
bool uses_fingerprints(store::Session& s, const Options& o);

// Runs the checks on one snapshot. Error(data) for an unknown activity. Writes nothing.
// On PostgreSQL the checks may be shared out to other connections (connections_for), which import
// this run's snapshot: they still all read the same one, heaviest query first (Check::weight), with
// no parallel workers of their own; the diffs keep the table's order.
// `seconds`, when given, receives each check's time, in order.
// `skipped`, when given, receives the checks that `o.more` stopped.
// `proven`, when given, receives the checks whose fingerprints agreed (uses_fingerprints).
std::vector<Diff> find_diffs(store::Store& st, const Options& o, Millis now,
                             std::vector<std::pair<std::string, double>>* seconds = nullptr,
                             std::vector<std::string>* skipped = nullptr,
                             std::vector<std::string>* proven = nullptr);

// Runs the checks and stores the run with its diffs (unless dry_run). The run row is written first
// (state running), so a run killed half-way is visible as running, never as clean; a run whose
// later checks were skipped (o.more) ends "incomplete" when it found nothing, "diffs" otherwise.
Report run(store::Store& st, const Options& o, const Clock& clock);

struct RunSummary {
  int64_t id = 0;
  std::string checks, state, operator_name;
  int64_t diff_count = 0;
  Millis started_at = 0;
  std::optional<Millis> finished_at;
};
// The latest runs, newest first.
std::vector<RunSummary> list_runs(store::Session& s, int64_t limit);
// One run and its diffs; nullopt when there is no such run.
std::optional<std::pair<RunSummary, std::vector<Diff>>> show_run(store::Session& s, int64_t run_id);

}  // namespace rc::jobs::reconcile
