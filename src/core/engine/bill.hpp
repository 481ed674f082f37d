#pragma once
// The delivery bill: the number a downstream dedupes on. It is persisted before any call and, once
// set on a grant, never replaced — every resend of the grant carries the same number.
#include <cstdint>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/states.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// The grant being delivered, as delivery needs it.
struct DeliveryTarget {
  int64_t id = 0;
  GrantState state = GrantState::init;
  std::string user, item, item_kind, channel, record_code;
  int64_t amount = 0;
  std::optional<std::string> bill_no;
};
std::optional<DeliveryTarget> load_delivery_target(store::Session& s, int64_t grant_id);

// For a grant now in issuing: a new bill (state sending, attempt 1) set on the grant, or another
// attempt on its existing bill. Returns the bill number. Throws Error(temp_fail) when another
// process set a bill number concurrently.
std::string open_bill(store::Session& s, const DeliveryTarget& t, Millis now);

// Records the bill's outcome (success, failed, awaiting_external, retryable, unknown).
void close_bill(store::Session& s, const std::string& bill, BillState state, const std::string& code,
                const std::string& msg, Millis now);

}  // namespace rc::engine
