#pragma once
// The in-database ledger channel: a delivered grant becomes one credit entry and a balance change,
// a reversal one debit entry ('reverse') and the opposite change. Both are idempotent by bill
// number: the unique (bill_no, kind) key makes a second credit or debit impossible, so a resend or a
// repeated reversal never moves money twice.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// The asset an item is credited to: cash and points are shared balances, others are per item
// ("coupon:C10").
std::string ledger_asset(const std::string& item_kind, const std::string& item_code);

// The account upsert shared by every credit (here and deliver_inline.cpp). A balance that would
// pass 2^63-1 changes no row: SQLite would otherwise store the sum as a floating-point number,
// which no later read of the account accepts (PostgreSQL raises 22003).
extern const char* const kAccountUpsert;
// Throws the Error(data) of a credit that would take the balance past 2^63-1.
[[noreturn]] void balance_overflow(const std::string& user, const std::string& asset, int64_t amount);

// Credits `amount` of `asset` to the user under `bill_no`. Returns false (and changes nothing) when
// that bill was credited before. Throws Error(data) when the user's balance of the asset would pass
// 2^63-1 (the caller's transaction then rolls back).
bool ledger_credit(store::Session& s, const std::string& bill_no, const std::string& user, const std::string& asset,
                   int64_t amount, Millis now);

struct LedgerCredit {
  std::string user, asset;
  int64_t amount = 0;
};
// The credit made under bill_no, if any.
std::optional<LedgerCredit> find_ledger_credit(store::Session& s, const std::string& bill_no);

// Takes back the credit `c` made under bill_no (one 'reverse' entry). Returns false (and changes
// nothing) when it was taken back before.
bool ledger_debit(store::Session& s, const std::string& bill_no, const LedgerCredit& c, Millis now);

struct LedgerBalance {
  std::string asset;
  int64_t balance = 0;
  Millis updated_at = 0;
};
// The user's balances, by asset.
std::vector<LedgerBalance> ledger_balances(store::Session& s, const std::string& user);

struct LedgerEntry {
  std::string bill_no, kind, asset;  // kind: credit | reverse
  int64_t amount = 0;
  Millis created_at = 0;
};
// The user's entries, oldest first.
std::vector<LedgerEntry> ledger_entries(store::Session& s, const std::string& user);

}  // namespace rc::engine
