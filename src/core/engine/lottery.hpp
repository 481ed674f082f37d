#pragma once
// Weighted draws with integer weights: prefix sums and a binary search, over a per-thread
// generator seeded from the secure random source. Pure: no database.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace rc::engine {

class WeightedPool {
 public:
  WeightedPool() = default;
  // REQUIRES: every weight >= 0. Entries with weight 0 are never picked.
  explicit WeightedPool(const std::vector<int64_t>& weights);
  int64_t total() const { return prefix_.empty() ? 0 : prefix_.back(); }
  // The index whose interval holds `value`. REQUIRES: 0 <= value < total().
  size_t pick(int64_t value) const;

 private:
  std::vector<int64_t> prefix_;  // prefix_[i] = w0 + ... + wi
};

// Uniform in [0, n). REQUIRES: n > 0.
int64_t random_below(int64_t n);
// Uniform in [lo, hi]. REQUIRES: lo <= hi.
int64_t random_between(int64_t lo, int64_t hi);

}  // namespace rc::engine
