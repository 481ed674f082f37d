// The built-in channels behind the Channel seam (channel.hpp): ledger and outbox in the database,
// webhook over HTTP.
#include "core/engine/channel.hpp"

#include <mutex>

#include "core/engine/deliver_inline.hpp"
#include "core/engine/ledger.hpp"
#include "base/error.hpp"

namespace rc::engine {

std::optional<GrantState> Channel::deliver_from_init(store::Session&, GrantView& g, const std::string&, Millis) {
  throw Error(Errc::internal, "channel '" + g.channel + "' is not in the database: it delivers after commit");
}

Completion Channel::complete(store::Session&, const DeliveryTarget& t, const std::string&, Millis) {
  throw Error(Errc::internal, "channel '" + t.channel + "' is not in the database: it delivers after commit");
}

delivery::Result Channel::call(const delivery::Request& r) {
  throw Error(Errc::internal, "bill " + r.bill_no + ": an in-database channel is never called");
}

namespace {

// A credit entry and the account's balance, in the grant's own database (ledger.hpp).
class LedgerChannel : public Channel {
 public:
  bool in_database() const override { return true; }
  bool credits_ledger() const override { return true; }
  std::optional<GrantState> deliver_from_init(store::Session& s, GrantView& g, const std::string& actor,
                                              Millis now) override {
    return deliver_inline(s, InlineChannel::ledger, g, actor, now);
  }
  Completion complete(store::Session& s, const DeliveryTarget& t, const std::string& bill, Millis now) override {
    // idempotent by bill number: a second credit under the same bill changes nothing
    const std::string asset = ledger_asset(t.item_kind, t.item);
    ledger_credit(s, bill, t.user, asset, t.amount, now);
    return {GrantState::success, "ledger credited", "0", "credited " + asset};
  }
};

// A row in the outbox table for another system to pick up; the grant waits for its answer.
class OutboxChannel : public Channel {
 public:
  bool in_database() const override { return true; }
  std::optional<GrantState> deliver_from_init(store::Session& s, GrantView& g, const std::string& actor,
                                              Millis now) override {
    return deliver_inline(s, InlineChannel::outbox, g, actor, now);
  }
  Completion complete(store::Session& s, const DeliveryTarget& t, const std::string& bill, Millis now) override {
    s.exec(
        "INSERT INTO outbox (bill_no, channel, payload, state, created_at, updated_at) "
        "VALUES ($1, $2, $3, 'pending', $4, $4) ON CONFLICT (bill_no) DO NOTHING",
        {bill, t.channel, delivery::WebhookClient::body({t.id, bill, t.user, t.item, t.amount}), now});
    return {GrantState::awaiting_external, "written to outbox", "", ""};
  }
};

// A signed HTTP POST (delivery/channel.hpp). One client, made on the first call and reused (keep-
// alive); the client is not thread-safe, so calls take turns. The secret is resolved with the
// client: a secret that cannot be read fails that call (recorded as unknown, so the grant waits for
// a resend with its bill number), never the claims of other channels.
class WebhookChannel : public Channel {
 public:
  WebhookChannel(delivery::ChannelConfig cfg, GetEnv getenv) : cfg_(std::move(cfg)), getenv_(std::move(getenv)) {}
  bool in_database() const override { return false; }
  delivery::Result call(const delivery::Request& r) override {
    std::lock_guard<std::mutex> l(mu_);
    if (!client_)
      client_.emplace(cfg_, resolve_secret(cfg_.secret_ref, "channels." + cfg_.name + ".secret", getenv_));
    return client_->post(r);
  }
  int timeout_ms() const override { return cfg_.timeout_ms; }

 private:
  const delivery::ChannelConfig cfg_;
  const GetEnv getenv_;
  std::mutex mu_;
  std::optional<delivery::WebhookClient> client_;
};

}  // namespace

std::unique_ptr<Channel> make_channel(const delivery::ChannelConfig& cfg, const GetEnv& getenv) {
  if (cfg.type == "ledger") return std::make_unique<LedgerChannel>();
  if (cfg.type == "outbox") return std::make_unique<OutboxChannel>();
  if (cfg.type == "webhook") return std::make_unique<WebhookChannel>(cfg, getenv);
  throw Error(Errc::config, "channel '" + cfg.name + "' has unknown type '" + cfg.type + "'");
}

}  // namespace rc::engine
