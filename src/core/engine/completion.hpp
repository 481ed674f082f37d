#pragma once
// Completion of an outbox delivery: the external system's answer moves the grant
// awaiting_external -> success | failed, with the outbox row and the delivery bill.
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/engine/grant_view.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

struct CompleteOutcome {
  bool changed = false;
  std::string state, message;
  std::optional<GrantView> grant;
};

// Throws Error(not_found) when no grant has that bill number. A grant not in awaiting_external is
// refused (changed = false, the message names its state).
CompleteOutcome complete(store::Store& st, const std::string& bill_no, bool ok, const std::optional<std::string>& reason,
                         const std::string& actor, Millis now, bool dry_run = false);

}  // namespace rc::engine
