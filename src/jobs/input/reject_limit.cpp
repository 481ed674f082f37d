#include "jobs/input/reject_limit.hpp"

#include <cstdio>
#include <cstdlib>

#include "base/error.hpp"

namespace rc::jobs::import {

RejectLimit RejectLimit::parse(const std::string& s) {
  RejectLimit l;
  auto bad = [&] {
    return Error(Errc::usage, "--max-rejects must be a count (10) or a percentage of the rows read (0.5%), not '" + s + "'");
  };
  if (s.empty()) throw bad();
  if (s.back() == '%') {
    std::string num = s.substr(0, s.size() - 1);
    char* end = nullptr;
    double p = std::strtod(num.c_str(), &end);
    if (num.empty() || *end || !(p >= 0 && p <= 100)) throw bad();
    l.percent = p;
    return l;
  }
  for (char c : s)
    if (c < '0' || c > '9') throw bad();
  if (s.size() > 18) throw bad();
  l.count = std::stoll(s);
  return l;
}

bool RejectLimit::over(int64_t rejected, int64_t read) const {
  if (percent < 0) return rejected > count;
  return double(rejected) * 100.0 > percent * double(read) + 1e-9;
}

std::string RejectLimit::text() const {
  if (percent < 0) return std::to_string(count);
  char buf[32];
  snprintf(buf, sizeof buf, "%g%%", percent);
  return buf;
}

}  // namespace rc::jobs::import
