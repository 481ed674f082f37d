#pragma once
// serve's counters, in Prometheus text (GET /metrics, docs/serve.md "Metrics"): requests by
// endpoint and code, a latency histogram per endpoint, requests in flight, database errors, and
// grants by activity and outcome (granted, replayed, held). In memory, since the process started.
// Thread-safe.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace rc::serve {

class Metrics {
 public:
  // One answered request: its endpoint label, answer code and HTTP status, and how long it took.
  void request(const std::string& endpoint, int code, int http, int64_t duration_us);
  // A grant answered (outcome: granted, replayed, held) in activity `activity`, and the state it
  // was answered in (success, awaiting_external, delayed_resend, failed, pending, ...): a delivery
  // that failed shows as its state.
  void grant(const std::string& activity, const std::string& outcome, const std::string& state);
  void db_error() { db_errors_.fetch_add(1, std::memory_order_relaxed); }
  std::atomic<int64_t> in_flight{0};
  // The text of GET /metrics.
  std::string text() const;

  // Upper bounds of the latency buckets, in seconds (the last, +Inf, is implied).
  static constexpr std::array<double, 12> kBuckets{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                                   0.05,   0.1,   0.2,   0.5,   1,    5};

 private:
  struct Histogram {
    std::array<int64_t, kBuckets.size()> le{};  // cumulative at text() time; stored per bucket
    int64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, int, int>, int64_t> requests_;  // (endpoint, code, http)
  std::map<std::string, Histogram> latency_;
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> grants_;  // (activity, outcome, state)
  std::atomic<int64_t> db_errors_{0};
};

}  // namespace rc::serve
