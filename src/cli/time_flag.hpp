#pragma once
// Times given on the command line (report --from/--to, import-qualifications --expires-at).
#include <string>

#include "core/clock.hpp"

namespace rc::cli {

// RFC 3339 with an offset -> epoch ms. Error(usage) naming `flag`, showing `example` and the value
// given (its first 60 bytes, cut on a character boundary) otherwise. Defined in context.cpp.
Millis time_flag(const std::string& v, const std::string& flag, const std::string& example);

}  // namespace rc::cli
