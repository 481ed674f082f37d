#pragma once
// How a claim step says no. A step that refuses throws Rejection{reason}: the claim's transaction
// rolls back (nothing it wrote survives) and the reason becomes the claim's outcome (reason.hpp).
#include "core/engine/reason.hpp"

namespace rc::engine {

struct Rejection {
  Reason reason;
};

}  // namespace rc::engine
