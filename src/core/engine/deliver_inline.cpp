#include "core/engine/deliver_inline.hpp"

#include "core/audit.hpp"
#include "core/delivery/channel.hpp"
#include "core/engine/ledger.hpp"
#include "util/hash.hpp"

namespace rc::engine {

namespace {

// $1 grant id, $2 bill number, $3 now, $4 actor, $5 reason, $6 channel, $7 amount, $8 to-state,
// then per channel: ledger $9 user, $10 asset, $11 bill message; outbox $9 payload.
// The conditional move; `to` names the parameter that holds the new state.
std::string move_sql(const std::string& to) {
  return "UPDATE grants SET state = " + to +
         ", bill_no = $2, updated_at = $3 WHERE id = $1 AND state = 'init' AND bill_no IS NULL";
}
const std::string& kLog = kStatusLogInsert;
const std::string kBill =
    "INSERT INTO delivery_bill (bill_no, grant_id, channel, amount, state, attempts, last_code, last_message, "
    "created_at, updated_at) ";
const std::string kEntry = "INSERT INTO ledger_entry (bill_no, kind, user_id, asset, amount, created_at) ";
const std::string kAccount = "INSERT INTO ledger_account (user_id, asset, balance, updated_at) ";
// ledger.cpp's upsert: a balance that would pass 2^63-1 changes no row (ledger.hpp)
const std::string kAccountConflict = std::string(kAccountUpsert).substr(std::string(kAccountUpsert).find(" ON CONFLICT"));
const std::string kOutbox = "INSERT INTO outbox (bill_no, channel, payload, state, created_at, updated_at) ";

// PostgreSQL: the move and everything that follows from it in one statement; every insert reads
// the move's RETURNING, so none happens when the move found the grant elsewhere.
const std::string kPgLedger = "WITH u AS (" + move_sql("$8") + " RETURNING id), l AS (" + kLog +
                              "SELECT 'grant', id, 'init', $8, $4, $5, NULL, $3 FROM u), b AS (" + kBill +
                              "SELECT $2, id, $6, $7, $8, 1, '0', $11, $3, $3 FROM u), e AS (" + kEntry +
                              "SELECT $2, 'credit', $9, $10, $7, $3 FROM u), a AS (" + kAccount +
                              "SELECT $9, $10, $7, $3 FROM u" + kAccountConflict +
                              " RETURNING 1) SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM a)";
const std::string kPgOutbox = "WITH u AS (" + move_sql("$8") + " RETURNING id), l AS (" + kLog +
                              "SELECT 'grant', id, 'init', $8, $4, $5, NULL, $3 FROM u), b AS (" + kBill +
                              "SELECT $2, id, $6, $7, $8, 1, '', '', $3, $3 FROM u), o AS (" + kOutbox +
                              "SELECT $2, $6, $9, 'pending', $3, $3 FROM u) SELECT count(*) FROM u";

}  // namespace

std::optional<GrantState> deliver_inline(store::Session& s, InlineChannel ch, GrantView& g, const std::string& actor,
                                          Millis now) {
  const bool ledger = ch == InlineChannel::ledger;
  const GrantState to = ledger ? GrantState::success : GrantState::awaiting_external;
  const std::string why = ledger ? "ledger credited" : "written to outbox";
  const std::string bill = new_id("B", now);
  const std::string asset = ledger ? ledger_asset(g.item_kind, g.item) : "";
  const std::string message = "credited " + asset;
  const std::string payload =
      ledger ? "" : delivery::WebhookClient::body({g.id, bill, g.user, g.item, g.amount});
  store::Params p{g.id, bill, now, actor, why, g.channel, g.amount, name(to)};
  if (ledger) p.insert(p.end(), {g.user, asset, message});
  else p.push_back(payload);

  if (s.dialect() == store::Dialect::postgres) {
    auto r = s.query(ledger ? kPgLedger : kPgOutbox, p);
    const int64_t moved = r[0].i64(0);                     // the grant rows moved out of init
    const int64_t accounts = ledger ? r[0].i64(1) : 1;  // the account rows credited
    if (moved != 1) return std::nullopt;
    if (accounts != 1) balance_overflow(g.user, asset, g.amount);
  } else {
    // SQLite runs in the process: the same rows, one statement each.
    if (s.exec(move_sql("$4"), {g.id, bill, now, name(to)}) != 1)
      return std::nullopt;
    log_moved(s, g.id, GrantState::init, to, actor, why, now);
    s.exec(kBill + "VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $8)",
           {bill, g.id, g.channel, g.amount, name(ledger ? BillState::success : BillState::awaiting_external),
            ledger ? "0" : "", ledger ? message : "", now});
    if (ledger) {
      s.exec(kEntry + "VALUES ($1, 'credit', $2, $3, $4, $5)", {bill, g.user, asset, g.amount, now});
      if (s.exec(kAccountUpsert, {g.user, asset, g.amount, now}) != 1) balance_overflow(g.user, asset, g.amount);
    } else {
      s.exec(kOutbox + "VALUES ($1, $2, $3, 'pending', $4, $4)", {bill, g.channel, payload, now});
    }
  }
  g.state = to;
  g.bill_no = bill;
  g.updated_at = now;
  return to;
}

}  // namespace rc::engine
