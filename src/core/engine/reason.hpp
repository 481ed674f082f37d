#pragma once
// Why a claim was refused (or held): one enum and one name table, as the states have (states.hpp).
// The names are an interface: `claim -o json` prints them, the rejection statistics and `report`
// group by them, list-issue items and invalid grants store them, and scripts compare them, so a
// name never changes. Text becomes a Reason, and a Reason text, only through this table.
#include "core/states.hpp"

namespace rc {

// (in namespace rc, beside the states, so that names() and the json writer find it as theirs; the
// engine's code says engine::Reason)
enum class Reason {
  none,                // no reason: granted, replayed (its name, "none", is never printed)
  not_found,           // no such activity, or no such prize on it
  not_live,            // the activity is not open (pending review, approved, offline, ...)
  not_started,         // before the activity's window
  ended,               // after the window, or the activity ended
  paused,              // the activity is paused
  not_in_gray_list,    // gray release and the user is not on the gray list
  not_qualified,       // whitelist-only and the user has no qualification
  qualification_used,  // the user's qualification was used already
  blacklisted,         // the user is on the activity's blacklist
  limit_reached,       // the per-user limit of the period (activity or prize)
  sold_out,            // no stock left
  budget_exhausted,    // the budget (or its ladder's stop step) refuses the cost
  budget_degrade,      // the ladder's degrade step refuses a high-value prize (a step's answer; a
                       // claim ends with budget_exhausted or a consolation grant)
  held_by_fuse,        // a fuse blocks the activity or prize: the request is held (held.hpp)
  biz_id_conflict,     // the biz_id has a grant of another user or activity
};

const NameTable<Reason>& names(Reason);

// nlohmann::json writes a reason as its name (found by ADL).
template <class Json>
void to_json(Json& j, const Reason& v) {
  j = name(v);
}

// A reason whose request may still succeed later without anyone changing the request: the
// activity is not open yet or for now, or a fuse holds it (list-issue leaves such items pending).
bool is_transient(Reason r);

namespace engine {
using rc::is_transient;
using rc::Reason;
}  // namespace engine

}  // namespace rc
