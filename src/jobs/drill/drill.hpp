#pragma once
// drill: rehearse an activity before it goes live (docs/design.md §6.8) — run its
// definition through the real engine and jobs, in a scratch database the drill owns, never the live
// one, and say per check whether the rules hold.
//
// Each check runs on its own copy of the definition (code "<run tag>_<check>"), adapted only as the
// check needs — stock clamped or lifted, budget set or lifted, limits kept or removed — and with the
// window moved around the drill's own clock, which the checks move as they need (a limit period's
// midnight, the end of the window, a day earlier for day-over-day). Claims go through Engine::claim
// (or claim_many for volume) without delivery: a drill never calls a webhook. Concurrency is real:
// `workers` processes, each on its own connection, start together at a barrier (drill_workers.hpp).
//
// Checks (result pass, fail or n/a when the definition has nothing to check):
//   oversell     stock clamped to a small N per prize, workers of distinct users: exactly N granted
//                per prize, stock 0, never below
//   idempotency  the same biz_id from every worker at once: one grant, the others replays
//   limits       one user past the limit from every worker: exactly the limit; a day/week/month limit
//                resets at midnight in the activity's zone (refused 1 ms before, granted at it)
//   budget       a budget of one grant's cost, two concurrent claims: never over budget (direct: one grant)
//   lottery      draws with stock lifted: chi-square of frequencies against weights (p > 0.001); each
//                guarantee hit on its draw; the degrade path taken when prizes are sold out; expected
//                cost per draw and the draws the budget covers
//   fuse         each rule stays quiet under its threshold and trips on a spike; a rule that can never
//                trip with this stock (or a prize that costs nothing) fails
//   expiry       after the window, expire ends the activity once (a second run changes nothing)
//   peak         with peak_qps: the claims/s reached at `workers` must be >= 2 x peak_qps (claims without
//                delivery: a channel's time is not in the figure)
//   reconcile    clean over the whole scratch database at the end
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/activity/definition.hpp"
#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::jobs::drill {

struct Check {
  std::string name;
  std::string result;  // pass | fail | n/a
  std::string detail;  // one line for people: the figures behind the result
  nlohmann::json figures = nlohmann::json::object();
};

struct Options {
  std::string text;            // the definition's TOML
  std::string source;          // its name, for messages ("file.toml" or "activity CODE")
  int workers = 16;
  std::optional<double> peak_qps;
  int64_t lottery_draws = 100'000;
  double peak_seconds = 2.0;
  std::string scratch_url;     // "" : a temporary SQLite file, removed afterwards
  std::string live_url;        // refused as a scratch database
  bool pooled = false;         // a PostgreSQL scratch database is reached through a pooler in transaction
                               // mode (db.pooler): no session state, a row lease (docs/design.md §9.2)
  store::Store* live = nullptr;  // the live database: a scratch database that turns out to be it is refused
  std::vector<std::string> ledger_channels{"ledger"};
  std::vector<std::string> outbox_channels{"outbox"};
  std::string operator_name = "rewardctl";
  // called after each check, for progress lines
  std::function<void(const Check&)> on_check;
};

struct Report {
  std::string code, hash, scratch;  // scratch: where it ran, for people (no secrets)
  std::vector<Check> checks;
  Millis started_at = 0, finished_at = 0;
  bool passed() const;
};

// Runs every check. Error(data) when the scratch database is not empty and not made by a drill, or
// is the live one (the same file; on PostgreSQL the same server, database and schema);
// Error(temp_fail) when another drill runs in the same scratch database. A failure of the
// environment rather than of the definition - a signal (interrupted), the scratch database going
// away (unavailable), a lease (temp_fail), a privilege (no_perm) - ends the drill with that error
// and nothing is recorded: a drill_run row only ever says something about the definition.
Report run(const activity::Definition& d, const Options& o, Millis now);

// Stores the report in the live database (drill_run). Returns the run id.
int64_t store_run(store::Store& live, const Report& r, const std::string& operator_name);

// The latest run for this code and definition hash, when it passed (a later failing run of the same
// hash withdraws an earlier pass).
std::optional<int64_t> passing_run(store::Session& s, const std::string& code, const std::string& hash);

}  // namespace rc::jobs::drill
