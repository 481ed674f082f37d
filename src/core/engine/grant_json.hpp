#pragma once
// A grant as JSON: the keys of `claim -o json`, `record show -o json` and the data of serve's
// /v1 endpoints. The keys are an interface: change them only on purpose.
#include <nlohmann/json.hpp>

#include "core/engine/grant_view.hpp"

namespace rc::engine {

nlohmann::json grant_json(const GrantView& g);

}  // namespace rc::engine
