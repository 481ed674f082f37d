#include "core/engine/ledger.hpp"

#include "base/error.hpp"

namespace rc::engine {

const char* const kAccountUpsert =
    "INSERT INTO ledger_account (user_id, asset, balance, updated_at) VALUES ($1, $2, $3, $4) "
    "ON CONFLICT (user_id, asset) DO UPDATE SET balance = ledger_account.balance + excluded.balance, "
    "updated_at = excluded.updated_at WHERE ledger_account.balance <= 9223372036854775807 - excluded.balance";

void balance_overflow(const std::string& user, const std::string& asset, int64_t amount) {
  throw Error(Errc::bad_input, "user " + user + "'s balance of " + asset + " plus " + std::to_string(amount) +
                                   " would pass 2^63-1: nothing credited");
}

std::string ledger_asset(const std::string& item_kind, const std::string& item_code) {
  if (item_kind == "cash" || item_kind == "points") return item_kind;
  return item_kind + ":" + item_code;
}

bool ledger_credit(store::Session& s, const std::string& bill_no, const std::string& user, const std::string& asset,
                   int64_t amount, Millis now) {
  int64_t n = s.exec(
      "INSERT INTO ledger_entry (bill_no, kind, user_id, asset, amount, created_at) VALUES ($1, 'credit', $2, $3, $4, $5) "
      "ON CONFLICT (bill_no, kind) DO NOTHING",
      {bill_no, user, asset, amount, now});
  if (n != 1) return false;
  if (s.exec(kAccountUpsert, {user, asset, amount, now}) != 1) balance_overflow(user, asset, amount);
  return true;
}

std::optional<LedgerCredit> find_ledger_credit(store::Session& s, const std::string& bill_no) {
  auto r = s.query("SELECT user_id, asset, amount FROM ledger_entry WHERE bill_no = $1 AND kind = 'credit'", {bill_no});
  if (r.empty()) return std::nullopt;
  return LedgerCredit{r[0].str(0), r[0].str(1), r[0].i64(2)};
}

bool ledger_debit(store::Session& s, const std::string& bill_no, const LedgerCredit& c, Millis now) {
  int64_t n = s.exec(
      "INSERT INTO ledger_entry (bill_no, kind, user_id, asset, amount, created_at) VALUES ($1, 'reverse', $2, $3, $4, $5) "
      "ON CONFLICT (bill_no, kind) DO NOTHING",
      {bill_no, c.user, c.asset, -c.amount, now});
  if (n != 1) return false;
  s.exec("UPDATE ledger_account SET balance = balance - $3, updated_at = $4 WHERE user_id = $1 AND asset = $2",
         {c.user, c.asset, c.amount, now});
  return true;
}

std::vector<LedgerBalance> ledger_balances(store::Session& s, const std::string& user) {
  auto r = s.query("SELECT asset, balance, updated_at FROM ledger_account WHERE user_id = $1 ORDER BY asset", {user});
  std::vector<LedgerBalance> out;
  for (auto& x : r.rows) out.push_back({x.str(0), x.i64(1), x.i64(2)});
  return out;
}

std::vector<LedgerEntry> ledger_entries(store::Session& s, const std::string& user) {
  auto r = s.query("SELECT bill_no, kind, asset, amount, created_at FROM ledger_entry WHERE user_id = $1 ORDER BY id",
                   {user});
  std::vector<LedgerEntry> out;
  for (auto& x : r.rows) out.push_back({x.str(0), x.str(1), x.str(2), x.i64(3), x.i64(4)});
  return out;
}

}  // namespace rc::engine
