#include "serve/metrics.hpp"

#include "util/prometheus.hpp"

#include <sstream>
#include <tuple>

namespace rc::serve {

namespace {
std::string label(const std::string& v) { return prometheus_label(v); }
}  // namespace

void Metrics::request(const std::string& endpoint, int code, int http, int64_t duration_us) {
  double s = double(duration_us) / 1e6;
  std::lock_guard<std::mutex> l(mu_);
  ++requests_[{endpoint, code, http}];
  auto& h = latency_[endpoint];
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (s <= kBuckets[i]) {
      ++h.le[i];
      break;
    }
  ++h.count;
  h.sum += s;
}

void Metrics::grant(const std::string& activity, const std::string& outcome, const std::string& state) {
  std::lock_guard<std::mutex> l(mu_);
  ++grants_[{activity, outcome, state}];
}

std::string Metrics::text() const {
  std::ostringstream o;
  std::lock_guard<std::mutex> l(mu_);
  o << "# HELP rewardctl_serve_requests_total Requests answered, by endpoint, answer code and HTTP status.\n"
       "# TYPE rewardctl_serve_requests_total counter\n";
  for (auto& [k, n] : requests_)
    o << "rewardctl_serve_requests_total{endpoint=\"" << label(std::get<0>(k)) << "\",code=\"" << std::get<1>(k)
      << "\",http=\"" << std::get<2>(k) << "\"} " << n << "\n";
  o << "# HELP rewardctl_serve_request_duration_seconds Time from the request read to the answer written.\n"
       "# TYPE rewardctl_serve_request_duration_seconds histogram\n";
  for (auto& [ep, h] : latency_) {
    int64_t cum = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cum += h.le[i];
      o << "rewardctl_serve_request_duration_seconds_bucket{endpoint=\"" << label(ep) << "\",le=\"" << kBuckets[i]
        << "\"} " << cum << "\n";
    }
    o << "rewardctl_serve_request_duration_seconds_bucket{endpoint=\"" << label(ep) << "\",le=\"+Inf\"} " << h.count
      << "\n"
      << "rewardctl_serve_request_duration_seconds_sum{endpoint=\"" << label(ep) << "\"} " << h.sum << "\n"
      << "rewardctl_serve_request_duration_seconds_count{endpoint=\"" << label(ep) << "\"} " << h.count << "\n";
  }
  o << "# HELP rewardctl_serve_in_flight Requests being answered now.\n"
       "# TYPE rewardctl_serve_in_flight gauge\n"
       "rewardctl_serve_in_flight "
    << in_flight.load() << "\n";
  o << "# HELP rewardctl_serve_db_errors_total Requests the database could not answer (503 or 500).\n"
       "# TYPE rewardctl_serve_db_errors_total counter\n"
       "rewardctl_serve_db_errors_total "
    << db_errors_.load() << "\n";
  o << "# HELP rewardctl_serve_grants_total Grants answered, by activity, outcome (granted, replayed, held) and the\n"
       "# state answered (a failed delivery shows as failed or delayed_resend).\n"
       "# TYPE rewardctl_serve_grants_total counter\n";
  for (auto& [k, n] : grants_)
    o << "rewardctl_serve_grants_total{activity=\"" << label(std::get<0>(k)) << "\",outcome=\"" << label(std::get<1>(k))
      << "\",state=\"" << label(std::get<2>(k)) << "\"} " << n << "\n";
  return o.str();
}

}  // namespace rc::serve
