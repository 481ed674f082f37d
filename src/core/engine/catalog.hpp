#pragma once
// The static configuration of one activity version (its kind, zone, limits, prizes, lottery pool
// and guarantees): read once and cached per engine, reloaded when the activity's version changes.
// Dynamic state (activity state, blocked prizes, stock, budget) is never cached: the claim reads it
// inside its own transaction.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/engine/lottery.hpp"
#include "core/states.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

struct PrizeInfo {
  int64_t id = 0;
  std::string code, item, item_kind, channel;
  int64_t amount = 0;
  std::optional<int64_t> amount_max;
  int64_t unit_cost_cents = 0;
  int64_t buckets = 1;
  std::optional<int64_t> limit;
  Period limit_period = Period::total;
  int64_t weight = 0;
  bool consolation = false;
  bool high_value = false;  // switched off from the budget ladder's degrade step on
  std::optional<int64_t> validity_days;
};

struct ActivityCatalog {
  int64_t id = 0, version = 0;
  std::string code, timezone;
  activity::Kind kind = activity::Kind::direct;
  bool whitelist_required = false;
  std::optional<int64_t> limit;
  Period limit_period = Period::total;
  bool has_budget = false;
  bool has_ladder = false;  // the budget has a ladder (budget_ladder.hpp): claims take it through the ladder
  std::vector<PrizeInfo> prizes;
  std::optional<size_t> consolation;       // index into prizes
  WeightedPool pool;                       // over prizes, by weight (lottery)
  std::map<int64_t, size_t> guarantees;    // nth draw -> prize index
  const PrizeInfo* prize(const std::string& code) const;
};

// Reads the catalog of the activity's current version. Throws Error(internal) when it is gone.
std::shared_ptr<const ActivityCatalog> load_catalog(store::Session& s, int64_t activity_id);

}  // namespace rc::engine
