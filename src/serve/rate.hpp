#pragma once
// The per-user rate limit of serve ([serve] user_rate, docs/serve.md): a token bucket per user id
// that refills at `rate` tokens a second up to `burst`. In memory, per process: with several serve
// processes behind a balancer a user gets up to rate x processes (a gateway's limit is the one to
// rely on for a hard bound; this one keeps a single script from hammering the database).
// Thread-safe.
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace rc::serve {

class UserRate {
 public:
  // rate <= 0: no limit (allow() is always true). burst < 1 is taken as max(1, rate).
  UserRate(double rate, double burst);
  // Takes one token of `user` at steady time now_us; false when the user has none left.
  bool allow(const std::string& user, int64_t now_us);
  bool enabled() const { return rate_ > 0; }
  // Users tracked now (a full bucket is forgotten when its shard grows past kMaxPerShard).
  size_t tracked() const;

 private:
  struct Bucket {
    double tokens;
    int64_t at_us;
  };
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, Bucket> users;
  };
  static constexpr size_t kShards = 16, kMaxPerShard = 65536;
  double rate_, burst_;
  std::vector<Shard> shards_;
};

}  // namespace rc::serve
