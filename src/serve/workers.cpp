#include "serve/workers.hpp"

namespace rc::serve {

int64_t steady_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

WorkerPool::WorkerPool(int workers, int queue_timeout_ms, std::function<std::unique_ptr<store::Store>()> open_store,
                       std::function<engine::EngineOptions()> engine_options, const Clock& clock)
    : open_store_(std::move(open_store)),
      engine_options_(std::move(engine_options)),
      clock_(clock),
      queue_timeout_ms_(queue_timeout_ms) {
  for (int i = 0; i < workers; ++i) free_.push_back(&workers_.emplace_back());
}

WorkerPool::Lease::Lease(WorkerPool& p) : p_(p) {
  std::unique_lock<std::mutex> l(p_.mu_);
  if (!p_.cv_.wait_for(l, std::chrono::milliseconds(p_.queue_timeout_ms_), [&] { return !p_.free_.empty(); }))
    throw Overloaded{};
  w_ = p_.free_.back();
  p_.free_.pop_back();
}

WorkerPool::Lease::~Lease() {
  std::lock_guard<std::mutex> l(p_.mu_);
  p_.free_.push_back(w_);
  p_.cv_.notify_one();
}

void WorkerPool::open(Worker& w) {
  if (w.eng) return;
  auto st = open_probe();
  auto eng = std::make_unique<engine::Engine>(*st, clock_, engine_options_());
  std::lock_guard<std::mutex> l(w.life);
  w.st = std::move(st);
  w.eng = std::move(eng);
}

std::unique_ptr<store::Store> WorkerPool::open_probe() {
  std::unique_ptr<store::Store> st;
  {
    std::lock_guard<std::mutex> l(open_mu_);
    st = open_store_();  // (its statements are never cancelled by a signal: ServeDeps::open_store)
  }
  return st;
}

void WorkerPool::reset(Worker& w) {
  std::lock_guard<std::mutex> l(w.life);
  w.deadline_us = 0;
  w.eng.reset();
  w.st.reset();
}

void WorkerPool::reset_all() {
  for (auto& w : workers_) reset(w);
}

int WorkerPool::reap(int64_t now_us) {
  int n = 0;
  for (auto& w : workers_) {
    int64_t d = w.deadline_us.load();
    if (!d || now_us < d) continue;
    std::lock_guard<std::mutex> l(w.life);
    if (w.st && w.deadline_us.load() == d && !w.st->severed()) {
      w.st->sever();
      ++n;
    }
  }
  return n;
}

}  // namespace rc::serve
