#pragma once
// A fixed-memory set-membership filter. Pure: no I/O.
#include <cstdint>
#include <string>

namespace rc::util {

// A Bloom filter of strings (import uses it on user ids: "certainly new" for nearly every row of a file, so
// that only the rare "maybe seen" ones need an exact duplicate check in the database). Memory is fixed at construction
// (1 to 32 MiB), whatever the file size; false positives only cost an extra check.
class Bloom {
 public:
  explicit Bloom(uint64_t expected_items);
  ~Bloom();
  Bloom(const Bloom&) = delete;
  Bloom& operator=(const Bloom&) = delete;
  // Adds key; returns true when it may have been added before.
  bool test_and_add(const std::string& key);
  uint64_t bytes() const { return (mask_ + 1) / 8; }

 private:
  uint64_t* bits_;
  uint64_t mask_;
};

}  // namespace rc::util
