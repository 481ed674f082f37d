#pragma once
// Engine internals shared by its .cpp files.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/lottery.hpp"

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
  std::optional<int64_t> validity_days;
};

// The static configuration of one activity version: cached per engine, reloaded when the
// activity's version changes. Dynamic state (activity state, blocked prizes, stock, budget) is
// always read inside the claim's transaction.
struct ActivityCatalog {
  int64_t id = 0, version = 0;
  std::string code, kind, timezone;
  bool whitelist_required = false;
  std::optional<int64_t> limit;
  Period limit_period = Period::total;
  bool has_budget = false;
  std::vector<PrizeInfo> prizes;
  std::optional<size_t> consolation;       // index into prizes
  WeightedPool pool;                       // over prizes, by weight (lottery)
  std::map<int64_t, size_t> guarantees;    // nth draw -> prize index
  const PrizeInfo* prize(const std::string& code) const;
};

std::shared_ptr<const ActivityCatalog> load_catalog(store::Session& s, int64_t activity_id);

// SELECT list and FROM clause that build a GrantView (see to_view).
extern const char* kGrantSelect;
GrantView to_view(const store::Row& r);

// Limit-counter scopes: "a:<activity id>", "p:<prize id>", "d:<activity id>" (draw count).
std::string scope_activity(int64_t id);
std::string scope_prize(int64_t id);
std::string scope_draws(int64_t id);

// The bucket a user prefers: spreads users over buckets, stable per user.
int64_t preferred_bucket(const std::string& user, int64_t buckets);

// Ledger asset credited for an item: cash and points are shared balances, others are per item.
std::string ledger_asset(const std::string& item_kind, const std::string& item_code);

}  // namespace rc::engine
