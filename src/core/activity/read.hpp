#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/store/store.hpp"

namespace rc::activity {
// Summary, state, window in its zone and UTC, stock left per prize, budget used, review decisions.
nlohmann::json show(store::Store& st, const std::string& code);
std::vector<nlohmann::json> list(store::Store& st, const std::optional<std::string>& state);
// Status log and audit rows of the activity, oldest first.
std::vector<nlohmann::json> history(store::Store& st, const std::string& code);
}  // namespace rc::activity
