#include "core/engine/stock.hpp"

#include "util/hash.hpp"

namespace rc::engine {

int64_t preferred_bucket(const std::string& user, int64_t buckets) {
  return buckets <= 1 ? 0 : int64_t(stable_hash(user) % uint64_t(buckets));
}

std::optional<int64_t> take_stock(store::Session& s, int64_t prize_id, int64_t buckets, int64_t first) {
  static const std::string kTake =
      "UPDATE stock SET remain = remain - 1 WHERE prize_id = $1 AND bucket = $2 AND remain > 0";
  if (s.exec(kTake, {prize_id, first}) == 1) return first;
  if (buckets <= 1) return std::nullopt;
  // The next bucket after `first` that holds stock, found by one statement; none means sold out,
  // whatever the number of buckets (trying them one by one took 1.8 s at 20,000 buckets). A bucket
  // found non-empty may be emptied by a concurrent claim before we take from it: then look again
  // (every miss means another claim took stock, so this ends).
  for (;;) {
    auto r = s.query("SELECT bucket FROM stock WHERE prize_id = $1 AND remain > 0 ORDER BY (bucket + $3 - $2) % $3 LIMIT 1",
                     {prize_id, first, buckets});
    if (r.empty()) return std::nullopt;
    const int64_t b = r[0].i64(0);
    if (s.exec(kTake, {prize_id, b}) == 1) return b;
  }
}

bool take_stock_units(store::Session& s, int64_t prize_id, int64_t bucket, int64_t n) {
  return s.exec("UPDATE stock SET remain = remain - $3 WHERE prize_id = $1 AND bucket = $2 AND remain >= $3",
                {prize_id, bucket, n}) == 1;
}

void return_stock(store::Session& s, int64_t prize_id, int64_t bucket) {
  s.exec("UPDATE stock SET remain = remain + 1 WHERE prize_id = $1 AND bucket = $2", {prize_id, bucket});
}

}  // namespace rc::engine
