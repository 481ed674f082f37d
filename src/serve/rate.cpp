#include "serve/rate.hpp"

#include <algorithm>
#include <functional>

namespace rc::serve {

UserRate::UserRate(double rate, double burst)
    : rate_(rate), burst_(burst >= 1 ? burst : std::max(1.0, rate)), shards_(kShards) {}

bool UserRate::allow(const std::string& user, int64_t now_us) {
  if (rate_ <= 0) return true;
  Shard& s = shards_[std::hash<std::string>{}(user) % kShards];
  std::lock_guard<std::mutex> l(s.mu);
  if (s.users.size() >= kMaxPerShard) {
    // forget the users whose buckets have refilled: they would start full anyway
    for (auto it = s.users.begin(); it != s.users.end();) {
      double t = it->second.tokens + double(now_us - it->second.at_us) * rate_ / 1e6;
      it = t >= burst_ ? s.users.erase(it) : std::next(it);
    }
  }
  auto [it, fresh] = s.users.try_emplace(user, Bucket{burst_, now_us});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(burst_, b.tokens + double(std::max<int64_t>(0, now_us - b.at_us)) * rate_ / 1e6);
    b.at_us = std::max(b.at_us, now_us);
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

size_t UserRate::tracked() const {
  size_t n = 0;
  for (auto& s : shards_) {
    std::lock_guard<std::mutex> l(s.mu);
    n += s.users.size();
  }
  return n;
}

}  // namespace rc::serve
