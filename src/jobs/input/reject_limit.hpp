#pragma once
// The --max-rejects budget of an import or revoke.
#include <cstdint>
#include <string>

namespace rc::jobs::import {

// --max-rejects N or N%: how many rejected rows an import may have and still commit.
struct RejectLimit {
  int64_t count = 0;
  double percent = -1;  // >= 0 when given as a percentage of the rows read
  // Throws Error(usage) for anything but a non-negative integer or a percentage 0..100.
  static RejectLimit parse(const std::string& s);
  bool over(int64_t rejected, int64_t read) const;
  std::string text() const;
};

}  // namespace rc::jobs::import
