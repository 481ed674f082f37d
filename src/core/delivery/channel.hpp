#pragma once
// Delivery channel configuration, the request and outcome types, and the webhook client
// (docs/design.md §5). The engine persists a bill number before any call and reuses it on every
// resend; a channel must be idempotent by bill number. The engine delivers through the Channel seam
// (core/engine/channel.hpp), whose built-in webhook channel wraps WebhookClient.
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "core/config.hpp"

namespace rc::delivery {

// The standard delivery request.
struct Request {
  int64_t seq = 0;        // the grant id: monotonic per database
  std::string bill_no;    // persisted before the call, reused on resend: the downstream dedupe key
  std::string user_id;
  std::string item;       // item code
  int64_t amount = 0;     // cents for cash, units otherwise
};

enum class Outcome {
  success,    // delivered
  failed,     // a final error: retrying will not help
  retryable,  // a known, retryable error: the grant goes to delayed_resend
  unknown,    // timeout or connection error: we do not know; resend with the same bill number
};
const char* outcome_name(Outcome o);

struct Result {
  Outcome outcome = Outcome::unknown;
  std::string code;     // downstream ret code, HTTP status, or a local reason
  std::string message;  // errmsg or the transport error
};

struct ChannelConfig {
  std::string name;
  std::string type;  // ledger | webhook | outbox
  // webhook
  std::string url;
  std::string secret_ref;            // env:NAME or file:PATH
  int connect_timeout_ms = 1000;
  int timeout_ms = 3000;             // total
  std::vector<int64_t> retryable_rets;  // downstream ret codes worth retrying; other non-zero rets are final
  int rate_per_second = 0;           // 0: unlimited
  std::string signature_header = "X-Rewardctl-Signature";
};

// Reads [channels.NAME] tables. The built-in channels `ledger` and `outbox` exist without
// configuration. Throws Error(config) naming file:line:column for a bad table.
std::map<std::string, ChannelConfig> parse_channels(const Settings& s);

// At most `per_second` request starts in any one-second window (a sliding log of the last N
// starts). Pure: the caller passes the current time and waits until the returned start time, so
// tests drive it with an injected clock. per_second <= 0: unlimited (acquire returns `now`).
class RateLimiter {
 public:
  using clock = std::chrono::steady_clock;
  explicit RateLimiter(int per_second = 0) : per_second_(per_second) {}
  // Reserves the earliest start slot not before `now` (and not before the previous slot) that keeps
  // at most per_second starts in every one-second window, and returns it.
  clock::time_point acquire(clock::time_point now);

 private:
  int per_second_;
  std::deque<clock::time_point> starts_;  // the last per_second starts, oldest first
};

// HTTP POST of the JSON request body {seq, bill_no, user_id, item, amount}, signed with
// HMAC-SHA256 of the body under the channel secret: header "<signature_header>: sha256=<hex>".
// Response {ret, errmsg}: ret 0 is success, a ret in retryable_rets is retryable, any other ret is
// final. HTTP 5xx and 429 are retryable, other non-2xx are final. A timeout or a connection error
// is unknown, never failed. A 2xx without a JSON integer `ret` is unknown.
// Not thread-safe (one CURL handle, one limiter): use one client per thread. Movable, not copyable.
// The constructor throws Error(config) for a non-webhook config or an empty secret.
class WebhookClient {
 public:
  WebhookClient(ChannelConfig cfg, std::string secret);
  ~WebhookClient();
  WebhookClient(const WebhookClient&) = delete;
  WebhookClient& operator=(const WebhookClient&) = delete;
  WebhookClient(WebhookClient&& o) noexcept;
  WebhookClient& operator=(WebhookClient&& o) noexcept;
  Result post(const Request& r);
  // The exact bytes that are signed and sent. Throws Error(data) when a string is not valid UTF-8.
  static std::string body(const Request& r);

 private:
  ChannelConfig cfg_;
  std::string secret_;
  void* curl_ = nullptr;  // a CURL* reused across calls (keep-alive)
  RateLimiter limiter_;
};

}  // namespace rc::delivery
