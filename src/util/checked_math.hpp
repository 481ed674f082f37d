#pragma once
// Checked 64-bit integer arithmetic for money (int64 cents) and counts. Pure, header-only.
#include <cstdint>
#include <optional>

namespace rc::util {

// a * b, clamped to INT64_MIN/INT64_MAX on overflow (for totals that are only compared to a limit).
inline int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return ((a < 0) != (b < 0)) ? INT64_MIN : INT64_MAX;
  return r;
}

// a + b, clamped to INT64_MIN/INT64_MAX on overflow.
inline int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b < 0 ? INT64_MIN : INT64_MAX;
  return r;
}

// a * b, or nullopt when it does not fit in 64 bits (for values that are stored).
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace rc::util
