#pragma once
// The rows a definition implies below its activity row (items, prizes with their stock buckets,
// listed users, fuse rules), written by create/update (activity_store.cpp) and by the switch to a
// new version of a running activity (version_switch.cpp). REQUIRES: called inside a write
// transaction; the definition passed lint (every prize's item exists, codes are unique).
#include <cstdint>

#include "core/activity/definition.hpp"
#include "core/store/store.hpp"

namespace rc::activity {

// Returns the new item's id.
int64_t insert_item(store::Session& s, int64_t activity_id, const ItemDef& it);
// The prize's configuration as bound parameters, in this order: item_id, amount, amount_max,
// user_limit, user_limit_period, weight, consolation, validity_days, position (its index in
// d.prizes; REQUIRES: p is an element of d.prizes), high_value. Stock is not configuration.
store::Params prize_params(const Definition& d, const PrizeDef& p, int64_t item_id);
// Inserts the prize and its stock, spread evenly over its buckets; returns the prize's id.
int64_t insert_prize(store::Session& s, int64_t activity_id, const Definition& d, const PrizeDef& p, int64_t item_id);
// Adds the definition's gray list and blacklist users (already listed ones are left as they are).
void add_listed_users(store::Session& s, int64_t activity_id, const Definition& d);
// The rule's figures as bound parameters, in this order: prize_id (NULL when 0: the whole
// activity), window_seconds, max_count, max_amount_cents, pop_percent, dod_percent, min_count.
store::Params fuse_params(const FuseDef& f, int64_t prize_id);
void insert_fuse_rule(store::Session& s, int64_t activity_id, const FuseDef& f, int64_t prize_id);

}  // namespace rc::activity
