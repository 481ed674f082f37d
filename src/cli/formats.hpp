#pragma once
// How core results look to the operator: one JSON object per result, which Output prints as a table
// or as a line. The keys are part of the `-o json` interface: change them only on purpose.
#include <nlohmann/json.hpp>

#include "core/activity/read.hpp"
#include "core/engine/grant_json.hpp"
#include "core/engine/ledger.hpp"

namespace rc::cli {

using engine::grant_json;
nlohmann::json activity_summary_json(const activity::ActivitySummary& s);
nlohmann::json activity_list_json(const activity::ActivityListRow& a);
nlohmann::json history_json(const activity::HistoryEvent& e);
nlohmann::json version_json(const activity::VersionEntry& v);
nlohmann::json ledger_balance_json(const std::string& user, const engine::LedgerBalance& b);
nlohmann::json ledger_entry_json(const std::string& user, const engine::LedgerEntry& e);

}  // namespace rc::cli
