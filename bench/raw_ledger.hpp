#pragma once
// The hand-written half of a raw equivalent shared by bench/claim and bench/list_issue: what a ledger
// delivery writes for one grant of one coupon - its bill (already closed), the credit entry and the
// account's balance - by prepared statements, with no reads.
#include <string>

#include "core/store/store.hpp"

namespace bench {

inline void raw_ledger_delivery(rc::store::Tx& tx, const std::string& bill, int64_t grant_id, const std::string& user,
                                int64_t now) {
  tx.exec("INSERT INTO delivery_bill (bill_no, grant_id, channel, amount, state, attempts, last_code, last_message, "
          "created_at, updated_at) VALUES ($1, $2, 'ledger', 1, 'success', 1, '0', 'credited', $3, $3)",
          {bill, grant_id, now});
  tx.exec("INSERT INTO ledger_entry (bill_no, kind, user_id, asset, amount, created_at) VALUES ($1, 'credit', $2, "
          "'coupon:coupon', 1, $3)",
          {bill, user, now});
  tx.exec("INSERT INTO ledger_account (user_id, asset, balance, updated_at) VALUES ($1, 'coupon:coupon', 1, $2) "
          "ON CONFLICT (user_id, asset) DO UPDATE SET balance = ledger_account.balance + excluded.balance, "
          "updated_at = excluded.updated_at",
          {user, now});
}

}  // namespace bench
