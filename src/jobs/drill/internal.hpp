#pragma once
// drill's internals shared by drill.cpp (scratch database, copies of the definition, the run) and
// drill_checks.cpp, drill_lottery.cpp and drill_fuse.cpp (one function per check).
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/engine.hpp"
#include "jobs/drill/drill.hpp"
#include "jobs/drill/workers.hpp"
#include "jobs/runtime/lease.hpp"
#include "jobs/runtime/runner.hpp"

namespace rc::jobs::drill {

// The drill's clock: one instant shared by every worker, moved by the checks.
class DrillClock : public Clock {
 public:
  explicit DrillClock(Millis t) : t_(t) {}
  Millis now_ms() const override { return t_.load(); }
  void set(Millis t) { t_.store(t); }

 private:
  std::atomic<Millis> t_;
};

// The database the drill owns: a temporary SQLite file, or --scratch-db (empty, or made by a drill).
struct Scratch {
  store::Dsn dsn;
  std::string tmpdir;    // the temporary SQLite file's directory ("" for --scratch-db)
  std::string describe;  // for people, without secrets
  std::unique_ptr<store::Store> st;
  std::unique_ptr<Lease> lease;  // one drill at a time per scratch database
  ~Scratch();
};

constexpr Millis kDay = 86'400'000;

// What every check gets.
struct Drill {
  const activity::Definition& def;
  const Options& o;
  Scratch& sc;
  DrillClock clock;
  std::string tag;  // this run's code prefix: "d" + 6 digits
  Millis t0;        // the drill's "now": every copy's window is built around it

  // A copy of the definition for one check: code "<tag>_<check>", window [t0 - 10 d, t0 + 60 d],
  // no fuse rules, gray list, blacklist or whitelist requirement. The check adapts it further.
  activity::Definition copy(const std::string& check) const;
  // Stores the copy live in the scratch database; returns its code. Its stored text is the
  // definition's, or without its lottery guarantees (which live only in the text) when asked.
  std::string create(const activity::Definition& d, bool keep_guarantees = true);
  engine::EngineOptions engine_options() const;
  // Runs a registered job (expire, fuse-scan) on the scratch database at the drill's clock.
  Counts run_job(const std::string& name, const std::function<void(JobRun&)>& fn);
  // n claims of distinct users in batches of one transaction each (claim_many), at the current
  // clock; returns outcomes per status/reason ("granted", "rejected:sold_out", ...).
  std::map<std::string, int64_t> issue(const std::string& code, int64_t n, const std::string& user_prefix,
                                       const std::optional<std::string>& prize = std::nullopt);
  // Runs `workers` worker processes of `task` (drill_workers.hpp), each with its own connection to
  // the scratch database, released together; the check sets what they claim (check, code, claims
  // or seconds, user and biz_id patterns, prizes), this fills in the scratch DSN, the clock's time
  // and the operator. Throws as run_workers does (a worker that dies fails the check).
  WorkersRun processes(int workers, WorkerTask task);
  int64_t count(const std::string& sql, const store::Params& p = {});
};

// Shifts a copy's budget and stock out of the way of a check about something else.
void lift_stock(activity::Definition& d, int64_t stock);
void lift_budget(activity::Definition& d);
void drop_limits(activity::Definition& d);

// What the checks share (drill_check_util.cpp): a claim request without delivery; a check's
// result (pass or fail) or n/a; grants and remaining stock per prize of one drill copy; whether a
// claim can end on a prize (a lottery: weighted or the consolation prize).
engine::ClaimRequest request(const std::string& code, const std::string& user, const std::string& biz);
Check result(bool pass, std::string detail, nlohmann::json figures = nlohmann::json::object());
Check not_applicable(std::string why);
struct PrizeBook {
  int64_t granted = 0, remain = 0, total = 0, degraded = 0;
};
std::map<std::string, PrizeBook> books(Drill& x, const std::string& code);
bool reachable(const activity::Definition& d, const activity::PrizeDef& p);

// One function per check; each returns its Check (name, result, detail, figures).
// (oversell, idempotency, limits, budget, expiry, peak, reconcile: drill_checks.cpp; lottery:
// drill_lottery.cpp; fuse: drill_fuse.cpp)
Check check_oversell(Drill& x);
Check check_idempotency(Drill& x);
Check check_limits(Drill& x);
Check check_budget(Drill& x);
Check check_lottery(Drill& x);
Check check_fuse(Drill& x);
Check check_expiry(Drill& x);
Check check_peak(Drill& x);
Check check_reconcile(Drill& x);

// The upper tail probability of the chi-square distribution with k degrees of freedom at x.
double chi_square_p(double x, int k);

}  // namespace rc::jobs::drill
