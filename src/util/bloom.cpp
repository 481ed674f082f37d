#include "util/bloom.hpp"

#include <cstdlib>
#include <functional>
#include <string_view>

#include "base/error.hpp"

namespace rc::util {

Bloom::Bloom(uint64_t expected_items) {
  uint64_t want = expected_items * 10, bits = uint64_t(8) << 20;  // 10 bits an item: ~1% false positives
  while (bits < want && bits < (uint64_t(256) << 20)) bits <<= 1;
  mask_ = bits - 1;
  // calloc: fresh zero pages from the kernel, resident only once touched
  bits_ = static_cast<uint64_t*>(calloc(bits / 64, sizeof(uint64_t)));
  if (!bits_) throw Error(Errc::internal, "out of memory for the duplicate filter");
}

Bloom::~Bloom() { free(bits_); }

bool Bloom::test_and_add(const std::string& key) {
  uint64_t h = std::hash<std::string_view>{}(key);
  uint64_t h2 = h * 0x9E3779B97F4A7C15ull;
  h2 ^= h2 >> 29;
  h2 |= 1;
  bool seen = true;
  for (int i = 0; i < 7; ++i) {
    uint64_t b = (h + uint64_t(i) * h2) & mask_;
    uint64_t bit = uint64_t(1) << (b & 63);
    uint64_t& w = bits_[b >> 6];
    if (!(w & bit)) {
      seen = false;
      w |= bit;
    }
  }
  return seen;
}

}  // namespace rc::util
