#pragma once
// The grant as callers see it: one row of grants joined with its activity, prize and item codes.
// Every read of a whole grant goes through kGrantSelect and to_view, so all of them agree.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/states.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

struct GrantView {
  int64_t id = 0;
  std::string record_code, biz_id, activity, prize, user, item, item_kind, channel;
  GrantState state = GrantState::init;
  int64_t amount = 0, cost_cents = 0;
  std::optional<std::string> bill_no, degraded_from, source, reason;
  std::optional<int64_t> draw_value, pool_version, bucket;
  Millis created_at = 0, updated_at = 0;
};

// SELECT list and FROM clause that build a GrantView (see to_view); append a WHERE clause.
extern const char* kGrantSelect;
GrantView to_view(const store::Row& r);

// One grant by record code, by biz_id, or by the bill number of its delivery (or nullopt).
std::optional<GrantView> find_grant(store::Session& s, const std::string& record_code);
std::optional<GrantView> find_grant_by_biz(store::Session& s, const std::string& biz_id);
std::optional<GrantView> find_grant_by_bill(store::Session& s, const std::string& bill_no);
// The grant's state as committed now. After a conditional update found another state, this fresh
// statement (READ COMMITTED) sees the concurrent winner: the state to report to the loser.
std::string current_state(store::Session& s, int64_t grant_id);
// The user's grants, oldest first, optionally only in one activity.
std::vector<GrantView> grants_of_user(store::Session& s, const std::string& user,
                                      const std::optional<std::string>& activity);

}  // namespace rc::engine
