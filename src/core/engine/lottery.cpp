#include "core/engine/lottery.hpp"

#include <algorithm>
#include <random>

#include "base/error.hpp"
#include "util/hash.hpp"

namespace rc::engine {

WeightedPool::WeightedPool(const std::vector<int64_t>& weights) {
  prefix_.reserve(weights.size());
  int64_t sum = 0;
  for (int64_t w : weights) {
    if (w < 0) throw Error(Errc::internal, "negative lottery weight");
    if (__builtin_add_overflow(sum, w, &sum)) throw Error(Errc::bad_input, "lottery weights sum beyond 64 bits");
    prefix_.push_back(sum);
  }
}

size_t WeightedPool::pick(int64_t value) const {
  // The first prefix sum strictly greater than value: zero-weight entries have an empty interval.
  auto it = std::upper_bound(prefix_.begin(), prefix_.end(), value);
  return size_t(it - prefix_.begin());
}

static std::mt19937_64& generator() {
  thread_local std::mt19937_64 g = [] {
    std::seed_seq::result_type seed[8];
    secure_random(seed, sizeof seed);
    std::seed_seq seq(std::begin(seed), std::end(seed));
    return std::mt19937_64(seq);
  }();
  return g;
}

int64_t random_below(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(generator()); }

int64_t random_between(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(generator()); }

}  // namespace rc::engine
