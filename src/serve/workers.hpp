#pragma once
// serve's workers (docs/serve.md "Model"): a fixed set, each with its own database session and
// Engine, opened on first use and opened again after it failed. A request leases one for its
// database work; a reaper ends the session of a request past its deadline (Store::sever), so that
// a database that stopped answering holds neither the caller nor the worker longer.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/clock.hpp"
#include "core/engine/engine.hpp"
#include "core/store/store.hpp"

namespace rc::serve {

// Steady time in microseconds: request durations and deadlines.
int64_t steady_us();

// One worker's session and engine. `life` guards their replacement against the reaper: the worker
// holds it only to open or drop the session, never while a statement runs.
struct Worker {
  std::unique_ptr<store::Store> st;
  std::unique_ptr<engine::Engine> eng;
  std::mutex life;
  std::atomic<int64_t> deadline_us{0};  // steady time the request in progress must end by (0: none)
};

class WorkerPool {
 public:
  // No worker became free within the queue timeout: the request is answered 503 (overloaded).
  struct Overloaded {};

  WorkerPool(int workers, int queue_timeout_ms, std::function<std::unique_ptr<store::Store>()> open_store,
             std::function<engine::EngineOptions()> engine_options, const Clock& clock);

  // A worker for the length of one request. Throws Overloaded.
  class Lease {
   public:
    explicit Lease(WorkerPool& p);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Worker& get() { return *w_; }

   private:
    WorkerPool& p_;
    Worker* w_;
  };

  // Opens w's session and engine unless it has them. Throws like open_store. Signals do not
  // cancel its statements (a first SIGTERM lets requests in progress finish).
  void open(Worker& w);
  // Drops w's session (broken, or severed): the next request on w opens a new one.
  static void reset(Worker& w);
  void reset_all();
  // Severs every session whose request is past its deadline at steady time now_us; returns how many.
  int reap(int64_t now_us);
  // A new session of its own (readyz), opened like a worker's.
  std::unique_ptr<store::Store> open_probe();

 private:
  std::function<std::unique_ptr<store::Store>()> open_store_;
  std::function<engine::EngineOptions()> engine_options_;
  const Clock& clock_;
  int queue_timeout_ms_;
  std::deque<Worker> workers_;  // (a deque: its elements never move)
  std::vector<Worker*> free_;
  std::mutex mu_, open_mu_;  // mu_: free_; open_mu_: open_store's calls, one at a time
  std::condition_variable cv_;
};

}  // namespace rc::serve
