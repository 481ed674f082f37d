#include "core/engine/reason.hpp"

namespace rc {

const NameTable<Reason>& names(Reason) {
  using R = Reason;
  static const NameTable<R> t{"claim reason",
                              {{R::none, "none"},
                               {R::not_found, "not_found"},
                               {R::not_live, "not_live"},
                               {R::not_started, "not_started"},
                               {R::ended, "ended"},
                               {R::paused, "paused"},
                               {R::not_in_gray_list, "not_in_gray_list"},
                               {R::not_qualified, "not_qualified"},
                               {R::qualification_used, "qualification_used"},
                               {R::blacklisted, "blacklisted"},
                               {R::limit_reached, "limit_reached"},
                               {R::sold_out, "sold_out"},
                               {R::budget_exhausted, "budget_exhausted"},
                               {R::budget_degrade, "budget_degrade"},
                               {R::held_by_fuse, "held_by_fuse"},
                               {R::biz_id_conflict, "biz_id_conflict"}}};
  return t;
}

bool is_transient(Reason r) {
  return r == Reason::paused || r == Reason::not_started || r == Reason::not_live || r == Reason::held_by_fuse;
}

}  // namespace rc
