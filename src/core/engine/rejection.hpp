#pragma once
// How a claim step says no. A step that refuses throws Rejection{reason}: the claim's transaction
// rolls back (nothing it wrote survives) and the reason becomes the claim's outcome. Reasons are
// the stable words listed on ClaimOutcome::reason.
#include <string>

namespace rc::engine {

struct Rejection {
  std::string reason;
};

}  // namespace rc::engine
