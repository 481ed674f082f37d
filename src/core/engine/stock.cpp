#include "core/engine/stock.hpp"

#include "util/hash.hpp"

namespace rc::engine {

int64_t preferred_bucket(const std::string& user, int64_t buckets) {
  return buckets <= 1 ? 0 : int64_t(stable_hash(user) % uint64_t(buckets));
}

std::optional<int64_t> take_stock(store::Session& s, int64_t prize_id, int64_t buckets, int64_t first) {
  for (int64_t k = 0; k < buckets; ++k) {
    int64_t b = (first + k) % buckets;
    if (s.exec("UPDATE stock SET remain = remain - 1 WHERE prize_id = $1 AND bucket = $2 AND remain > 0", {prize_id, b}) == 1)
      return b;
  }
  return std::nullopt;
}

void return_stock(store::Session& s, int64_t prize_id, int64_t bucket) {
  s.exec("UPDATE stock SET remain = remain + 1 WHERE prize_id = $1 AND bucket = $2", {prize_id, bucket});
}

}  // namespace rc::engine
