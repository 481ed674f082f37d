#include "core/engine/bill.hpp"

#include "util/hash.hpp"

namespace rc::engine {

std::optional<DeliveryTarget> load_delivery_target(store::Session& s, int64_t grant_id) {
  auto r = s.query(
      "SELECT g.id, g.state, g.user_id, i.code, i.kind, g.channel, g.record_code, g.amount, g.bill_no "
      "FROM grants g JOIN prize p ON p.id = g.prize_id JOIN item i ON i.id = p.item_id WHERE g.id = $1",
      {grant_id});
  if (r.empty()) return std::nullopt;
  const auto& x = r[0];
  return DeliveryTarget{x.i64(0), state_from_db<GrantState>(x.str(1)), x.str(2), x.str(3), x.str(4), x.str_or(5, ""),
                        x.str(6), x.i64(7), x.opt_str(8)};
}

std::string open_bill(store::Session& s, const DeliveryTarget& t, Millis now) {
  if (t.bill_no) {
    s.exec("UPDATE delivery_bill SET attempts = attempts + 1, state = 'sending', updated_at = $2 WHERE bill_no = $1",
           {*t.bill_no, now});
    return *t.bill_no;
  }
  std::string bill = new_id("B", now);
  s.exec(
      "INSERT INTO delivery_bill (bill_no, grant_id, channel, amount, state, attempts, created_at, updated_at) "
      "VALUES ($1, $2, $3, $4, 'sending', 1, $5, $5)",
      {bill, t.id, t.channel, t.amount, now});
  if (s.exec("UPDATE grants SET bill_no = $1 WHERE id = $2 AND bill_no IS NULL", {bill, t.id}) != 1)
    throw Error(Errc::busy, "grant " + t.record_code + " got a bill number concurrently: try again");
  return bill;
}

void close_bill(store::Session& s, const std::string& bill, BillState state, const std::string& code,
                const std::string& msg, Millis now) {
  s.exec("UPDATE delivery_bill SET state = $2, last_code = $3, last_message = $4, updated_at = $5 WHERE bill_no = $1",
         {bill, name(state), code, msg, now});
}

}  // namespace rc::engine
