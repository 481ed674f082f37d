#pragma once
// drill's concurrent workers are processes (issue 14: "--workers K processes"): the rewardctl binary
// itself (/proc/self/exe) started K times with the hidden first argument `__drill-worker`, each with
// its own connection to the scratch database, released together at a barrier.
//
// The protocol, one child per worker, over two pipes:
//   parent -> child stdin:  one JSON line, the WorkerTask (the scratch database's DSN travels here,
//                           never on the command line, where `ps` would show a password);
//   child  -> parent stdout: "ready PID\n" once connected; the child then blocks reading stdin;
//   parent closes every stdin: EOF on stdin is the start signal (the barrier);
//   child  -> parent stdout: one JSON line, its outcomes (or {"error", "kind"}), then it exits.
// A child that dies, exits without its line, or does not answer in time makes run_workers throw;
// every child is reaped (no zombies), the others are killed first. SIGINT/SIGTERM to the drill
// (core/interrupt) kills the children and throws Error(interrupted). Each child also has
// PR_SET_PDEATHSIG = SIGKILL: a drill killed with -9 does not leave workers claiming.
//
// Test-only hook: REWARDCTL_TEST_DRILL_KILL_WORKER=CHECK makes worker 0 of that check kill itself
// (SIGKILL) after its first claim, so a test can see the check fail rather than hang.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::jobs::drill {

// What one worker does: `claims` claims (or, with seconds > 0, claims until that long after the
// start), claim i of worker w as user `user` and biz_id `biz` with "{w}" and "{i}" replaced; a
// direct claim names prizes[(w + i) % prizes.size()] when prizes is not empty. No delivery.
struct WorkerTask {
  std::string check;  // the check's name (logs, the test hook)
  store::Dsn dsn;
  bool pooled = false;  // StoreOptions::pooled of the worker's connection
  std::string code;   // the activity copy
  Millis now = 0;     // the drill's clock during the run
  std::string operator_name;
  int worker = 0;
  int64_t claims = 0;
  double seconds = 0;
  std::string user, biz;
  std::vector<std::string> prizes;
};

struct WorkerResult {
  int64_t pid = 0;
  int64_t claims = 0;
  std::map<std::string, int64_t> outcomes;  // "granted", "replayed", "rejected:sold_out", ...
};

struct WorkersRun {
  std::vector<WorkerResult> workers;  // one per worker, in worker order
  double seconds = 0;                 // from the release at the barrier to the last result
  std::map<std::string, int64_t> outcomes() const;  // summed over the workers
  int64_t distinct_pids() const;
};

// Starts one process per task (task.worker = its index), waits until all are connected, releases
// them together and collects their results. Throws Error(internal) naming the worker, its pid and
// what happened when a worker dies, exits without a result or times out (connecting: 120 s; the
// work: 600 s plus the task's seconds); a worker's own Error is rethrown with its exit code;
// Error(interrupted) on SIGINT/SIGTERM. In every case all children are gone when it returns.
WorkersRun run_workers(const std::vector<WorkerTask>& tasks);

// The hidden entry `rewardctl __drill-worker` (main.cpp): reads the task from stdin and follows the
// protocol above. Returns the process's exit code.
int worker_main();

}  // namespace rc::jobs::drill
