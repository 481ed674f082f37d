// The hot-row takes a chunk defers to its end (claim_many, the release of held requests).
#include "core/engine/deferred_takes.hpp"

#include <map>
#include <set>

#include "core/engine/budget.hpp"
#include "core/engine/rejection.hpp"
#include "core/engine/stock.hpp"

namespace rc::engine {

// The chunk's deferred takes, once each, budget before stock (the order of a claim): true when all
// of them fitted. Buckets in order, so two chunks never wait on each other's buckets crosswise.
bool take_deferred(store::Tx& tx, const std::vector<HotTake>& takes) {
  std::map<int64_t, int64_t> budget;                     // activity -> cents
  std::map<std::pair<int64_t, int64_t>, int64_t> stock;  // (prize, bucket) -> units
  for (const auto& t : takes) {
    // a sum past 64 bits cannot fit any budget: the chunk takes as it goes instead
    if (t.budget && __builtin_add_overflow(budget[t.activity_id], t.cost_cents, &budget[t.activity_id])) return false;
    ++stock[{t.prize_id, t.bucket}];
  }
  try {
    for (const auto& [activity, cents] : budget) take_budget(tx, activity, cents);
  } catch (const Rejection&) {
    return false;
  }
  for (const auto& [key, n] : stock)
    if (!take_stock_units(tx, key.first, key.second, n)) return false;
  return true;
}

// Before a chunk that the deferred takes did not cover runs again taking as it goes (PostgreSQL):
// the buckets of each prize it takes without budget, locked in order (take_deferred's order).
// Taking as it goes, every request locks its own bucket (or the next one holding stock), so two such
// chunks lock buckets in their users' order and deadlock each other: 3 processes x 4 workers on a
// prize with 8 buckets and no budget all ended 40P01 after 9 attempts. A take that also takes budget
// needs nothing more: its request locks the budget row before any bucket, so those chunks queue on
// the budget row - and once the budget has run out they take, and lock, nothing. SQLite has one
// writer at a time: nothing to order.
void lock_buckets(store::Tx& tx, const std::vector<HotTake>& takes) {
  if (tx.dialect() != store::Dialect::postgres) return;
  std::set<int64_t> prizes;
  for (const auto& t : takes)
    if (!t.budget) prizes.insert(t.prize_id);
  for (int64_t p : prizes)
    tx.query("SELECT bucket FROM stock WHERE prize_id = $1 ORDER BY bucket" + tx.lock_rows(store::Lock::update), {p});
}

}  // namespace rc::engine
