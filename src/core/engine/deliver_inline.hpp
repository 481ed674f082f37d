#pragma once
// Delivery inside the claim's own transaction, for channels that live in the database (ledger,
// outbox): one commit for the claim and its delivery (DESIGN §4 step 9; docs/design.md §4).
//
// Contract: the grant is in init and has no bill number yet (a grant in init never has one: the
// bill is opened with the move out of init). One conditional update moves it init -> success
// (ledger) or init -> awaiting_external (outbox) and sets its new bill number; in the same
// transaction: its status-log row, the bill (written already closed, attempt 1), and the ledger
// entry plus the account's balance, or the outbox row. On PostgreSQL all of it is one statement
// (data-modifying CTEs), so a delivered claim costs one more round trip than an undelivered one.
// Remote channels (webhook) never come here: they are called after commit (deliver.cpp).
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/engine/grant_view.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

enum class InlineChannel { ledger, outbox };

// Delivers g (read or written in s's transaction) through an in-database channel. Returns the
// grant's new state and sets g.state, g.bill_no and g.updated_at; nullopt, with nothing written,
// when the grant was no longer in init without a bill (another process moved it first).
std::optional<GrantState> deliver_inline(store::Session& s, InlineChannel ch, GrantView& g, const std::string& actor,
                                          Millis now);

}  // namespace rc::engine
