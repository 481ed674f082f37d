#pragma once
// The delivery channel seam (docs/design.md §5). The engine owns the grant's state machine, its bill
// and its resend bill; a Channel only moves the value. There are two kinds, and each channel says
// which it is:
//
// - In the database (built in: ledger, outbox). Its delivery is rows written in the same database,
//   so it completes inside the transaction that moves the grant: from init inside the claim's own
//   transaction (deliver_from_init), or from issuing when deliver() or a resend runs (complete).
//   It never leaves a grant waiting on a remote answer. call() is not used.
// - Remote (built in: webhook). The engine persists the bill number and a pending resend bill,
//   commits, then call()s outside any transaction, and records the outcome in a new transaction.
//   The downstream dedupes on the bill number: a resend reuses it.
//
// EngineOptions::make_channel builds the channel of a [channels.NAME] config; tests give a factory
// whose channels time out or fail on cue without HTTP. The engine builds each channel once, on its
// first delivery through it.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/config.hpp"
#include "core/delivery/channel.hpp"
#include "core/engine/bill.hpp"
#include "core/engine/grant_view.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

// What an in-database channel wrote for a grant moved to issuing (Channel::complete).
struct Completion {
  GrantState state = GrantState::success;  // the grant's next state: success or awaiting_external
  std::string why;     // the status-log reason
  std::string code;    // the bill's last code ("0" for a credit)
  std::string message; // the bill's last message
};

class Channel {
 public:
  virtual ~Channel() = default;

  // True: deliveries complete inside the caller's transaction (deliver_from_init, complete);
  // false: the engine call()s after commit.
  virtual bool in_database() const = 0;

  // In-database channels. g is a grant read or written in s's transaction, in init without a bill
  // number. One conditional move init -> (success | awaiting_external) sets a new bill number; with
  // it, in s's transaction: the status-log row, the bill (already closed) and the channel's rows.
  // Returns the new state and updates g; nullopt, with nothing written, when another process moved
  // the grant first. The default throws Error(internal): a remote channel has no such delivery.
  virtual std::optional<GrantState> deliver_from_init(store::Session& s, GrantView& g, const std::string& actor,
                                                      Millis now);

  // In-database channels. t has just been moved to issuing with bill number `bill` in s's
  // transaction: writes the channel's rows, idempotent by bill number, and says which state the
  // engine moves the grant to. The default throws Error(internal).
  virtual Completion complete(store::Session& s, const DeliveryTarget& t, const std::string& bill, Millis now);

  // Remote channels. One call outside any transaction, idempotent downstream by r.bill_no. A
  // transport problem is an outcome (a timeout is unknown), not an exception; an Error thrown here
  // is recorded as unknown too. Safe to call from several threads. The default throws
  // Error(internal): an in-database channel is never called.
  virtual delivery::Result call(const delivery::Request& r);

  // True only for the built-in ledger: its deliver_from_init writes exactly a ledger credit (bill,
  // entry, balance), which the one-statement claim (claim_one.hpp) writes itself. A channel that
  // says false (every other, and any a test factory builds) always goes through deliver_from_init.
  virtual bool credits_ledger() const { return false; }

  // Remote channels: the longest one call() may take. A resend becomes due only after it passed.
  virtual int timeout_ms() const { return 0; }
};

// Builds the channel of one [channels.NAME] config. Throws Error(config) for a type it does not
// know. Anything that can fail later (a webhook's secret) is left to the first call, so that one
// channel's trouble never stops deliveries through another.
using ChannelFactory =
    std::function<std::unique_ptr<Channel>(const delivery::ChannelConfig& cfg, const GetEnv& getenv)>;

// The built-in factory: ledger, outbox and webhook by the config's type.
std::unique_ptr<Channel> make_channel(const delivery::ChannelConfig& cfg, const GetEnv& getenv);

}  // namespace rc::engine
