// The webhook delivery channel against a local fake endpoint (cpp-httplib on 127.0.0.1), the
// send-rate limiter with an injected clock, and the [channels.NAME] config parser.
#include <doctest/doctest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/config.hpp"
#include "core/delivery/channel.hpp"
#include "base/error.hpp"
#include "util/hash.hpp"

using namespace rc;
using namespace rc::delivery;
using namespace std::chrono_literals;

namespace {

const std::string kSecret = "s3cret-shared-with-the-endpoint";

// What the fake endpoint saw for one request.
struct Seen {
  std::string body, signature, content_type;
  bool signature_ok = false;
  int remote_port = -1;
};

// How the fake endpoint answers the next requests (when the signature is valid).
struct Reply {
  int status = 200;
  std::string body = R"({"ret":0,"errmsg":"ok"})";
  std::string content_type = "application/json";
  bool block = false;  // hold the answer until the endpoint shuts down (provokes a client timeout)
};

// A fake downstream: verifies the signature with the shared secret (constant time) and records
// every request. An invalid signature is answered {"ret":401} (final) whatever the scripted reply.
class Endpoint {
 public:
  explicit Endpoint(std::string header = "X-Rewardctl-Signature") : header_(std::move(header)) {
    std::signal(SIGPIPE, SIG_IGN);  // a handler answering a client that already gave up
    svr_.set_keep_alive_timeout(2);
    svr_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) { handle(req, res); });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    // stop() is a no-op before the loop runs: wait until it does (readiness, not a timing check)
    for (int i = 0; i < 5000 && !svr_.is_running(); ++i) std::this_thread::sleep_for(1ms);
    REQUIRE(svr_.is_running());
  }
  ~Endpoint() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      released_ = true;
    }
    cv_.notify_all();
    svr_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  void reply(Reply r) {
    std::lock_guard<std::mutex> lk(mu_);
    reply_ = std::move(r);
  }
  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> lk(mu_);
    return seen_;
  }
  // Waits until n requests arrived (synchronisation only: the bound is far above any real delay).
  bool wait_for_requests(size_t n) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, 20s, [&] { return seen_.size() >= n; });
  }

 private:
  void handle(const httplib::Request& req, httplib::Response& res) {
    Seen s;
    s.body = req.body;
    s.signature = req.get_header_value(header_);
    s.content_type = req.get_header_value("Content-Type");
    s.signature_ok = digest_equal(s.signature, "sha256=" + hmac_sha256_hex(kSecret, req.body));
    s.remote_port = req.remote_port;
    Reply r;
    {
      std::lock_guard<std::mutex> lk(mu_);
      seen_.push_back(s);
      r = reply_;
    }
    cv_.notify_all();
    if (!s.signature_ok) {
      res.status = 200;
      res.set_content(R"({"ret":401,"errmsg":"bad signature"})", "application/json");
      return;
    }
    if (r.block) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait_for(lk, 30s, [&] { return released_; });
    }
    res.status = r.status;
    res.set_content(r.body, r.content_type);
  }

  std::string header_;
  httplib::Server svr_;
  int port_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  Reply reply_;
  std::vector<Seen> seen_;
  bool released_ = false;
};

ChannelConfig webhook(const std::string& url) {
  ChannelConfig c;
  c.name = "hook";
  c.type = "webhook";
  c.url = url;
  c.secret_ref = "env:REWARD_WEBHOOK_SECRET";
  c.connect_timeout_ms = 10000;  // generous: a loaded CI machine must not turn a success into a timeout
  c.timeout_ms = 20000;
  c.retryable_rets = {1001, 1002};
  return c;
}

Request request(const std::string& bill = "B-0001") {
  Request r;
  r.seq = 42;
  r.bill_no = bill;
  r.user_id = "u-7";
  r.item = "coin100";
  r.amount = 100;
  return r;
}

// A TCP port on 127.0.0.1 that is bound but not listening: a connect is refused, and nothing else
// can take the port while the socket is held.
struct RefusingPort {
  int fd = -1;
  int port = 0;
  RefusingPort() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~RefusingPort() { close(fd); }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// request body and outcome names

TEST_CASE("webhook body: exact bytes, keys in the documented order") {
  CHECK(WebhookClient::body(request()) ==
        R"({"seq":42,"bill_no":"B-0001","user_id":"u-7","item":"coin100","amount":100})");
  Request r = request();
  r.seq = 9007199254740993;  // above 2^53: sent as an exact integer
  r.user_id = "用户\"1\\";
  r.amount = -5;
  CHECK(WebhookClient::body(r) ==
        R"({"seq":9007199254740993,"bill_no":"B-0001","user_id":"用户\"1\\","item":"coin100","amount":-5})");
}

TEST_CASE("webhook body: a string that is not valid UTF-8 is refused, never altered") {
  Request r = request();
  r.user_id = std::string("u\xff", 2);
  try {
    (void)WebhookClient::body(r);
    FAIL("expected Error(data)");
  } catch (const Error& e) {
    CHECK(e.kind() == Errc::bad_input);
  }
  Endpoint ep;
  WebhookClient c(webhook(ep.url()), kSecret);
  Result res = c.post(r);
  CHECK(res.outcome == Outcome::failed);
  CHECK(res.code == "invalid_request");
  CHECK(ep.seen().empty());  // nothing was sent
}

TEST_CASE("webhook outcome names") {
  CHECK(std::string(outcome_name(Outcome::success)) == "success");
  CHECK(std::string(outcome_name(Outcome::failed)) == "failed");
  CHECK(std::string(outcome_name(Outcome::retryable)) == "retryable");
  CHECK(std::string(outcome_name(Outcome::unknown)) == "unknown");
}

TEST_CASE("webhook client refuses an empty secret and a non-webhook channel") {
  CHECK_THROWS_AS(WebhookClient(webhook("http://127.0.0.1:1/hook"), ""), Error);
  ChannelConfig led = webhook("http://127.0.0.1:1/hook");
  led.type = "ledger";
  CHECK_THROWS_AS(WebhookClient(led, kSecret), Error);
}

// ---------------------------------------------------------------------------------------------
// classification against the fake endpoint

TEST_CASE("webhook success: ret 0, the endpoint saw the exact body and a valid signature") {
  Endpoint ep;
  WebhookClient c(webhook(ep.url()), kSecret);
  Result r = c.post(request());
  CHECK(r.outcome == Outcome::success);
  CHECK(r.code == "0");
  CHECK(r.message == "ok");
  auto seen = ep.seen();
  REQUIRE(seen.size() == 1);
  const std::string expected_body = WebhookClient::body(request());
  CHECK(seen[0].body == expected_body);
  CHECK(seen[0].signature_ok);
  CHECK(seen[0].signature == "sha256=" + hmac_sha256_hex(kSecret, expected_body));
  CHECK(seen[0].content_type == "application/json");
}

TEST_CASE("webhook signature header name comes from the channel config") {
  Endpoint ep("X-Sig");
  ChannelConfig cfg = webhook(ep.url());
  cfg.signature_header = "X-Sig";
  WebhookClient c(cfg, kSecret);
  CHECK(c.post(request()).outcome == Outcome::success);
  auto seen = ep.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].signature_ok);
}

TEST_CASE("webhook with the wrong secret: the endpoint rejects the signature and the client reports failed") {
  Endpoint ep;
  WebhookClient c(webhook(ep.url()), "not-the-shared-secret");
  Result r = c.post(request());
  CHECK(r.outcome == Outcome::failed);
  CHECK(r.code == "401");
  CHECK(r.message == "bad signature");
  auto seen = ep.seen();
  REQUIRE(seen.size() == 1);
  CHECK_FALSE(seen[0].signature_ok);
}

TEST_CASE("webhook ret listed in retryable_rets is retryable") {
  Endpoint ep;
  ep.reply({200, R"({"ret":1002,"errmsg":"busy, try later"})", "application/json", false});
  WebhookClient c(webhook(ep.url()), kSecret);
  Result r = c.post(request());
  CHECK(r.outcome == Outcome::retryable);
  CHECK(r.code == "1002");
  CHECK(r.message == "busy, try later");
}

TEST_CASE("webhook ret not in retryable_rets is a final failure") {
  Endpoint ep;
  ep.reply({200, R"({"ret":2001,"errmsg":"user does not exist"})", "application/json", false});
  WebhookClient c(webhook(ep.url()), kSecret);
  Result r = c.post(request());
  CHECK(r.outcome == Outcome::failed);
  CHECK(r.code == "2001");
  CHECK(r.message == "user does not exist");
}

TEST_CASE("webhook HTTP 5xx and 429 are retryable") {
  for (int status : {500, 503, 429}) {
    CAPTURE(status);
    Endpoint ep;
    ep.reply({status, "oops", "text/plain", false});
    WebhookClient c(webhook(ep.url()), kSecret);
    Result r = c.post(request());
    CHECK(r.outcome == Outcome::retryable);
    CHECK(r.code == "http_" + std::to_string(status));
    CHECK(r.message == "oops");
  }
}

TEST_CASE("webhook HTTP 400 and other non-2xx are final failures") {
  for (int status : {400, 404, 302}) {
    CAPTURE(status);
    Endpoint ep;
    ep.reply({status, R"({"ret":0})", "application/json", false});  // a ret 0 body does not rescue a 4xx
    WebhookClient c(webhook(ep.url()), kSecret);
    Result r = c.post(request());
    CHECK(r.outcome == Outcome::failed);
    CHECK(r.code == "http_" + std::to_string(status));
  }
}

TEST_CASE("webhook 2xx without a JSON integer ret is unknown") {
  const std::vector<std::string> bodies = {"<html>OK</html>", "", R"({"errmsg":"no ret"})", R"({"ret":"0"})",
                                           R"({"ret":0.0})", "[0]", R"({"ret":0)"};
  for (const auto& b : bodies) {
    CAPTURE(b);
    Endpoint ep;
    ep.reply({200, b, "application/json", false});
    WebhookClient c(webhook(ep.url()), kSecret);
    Result r = c.post(request());
    CHECK(r.outcome == Outcome::unknown);
    CHECK(r.code == "bad_response");
  }
}

TEST_CASE("webhook timeout is unknown, and the resend carries the same bill number") {
  Endpoint ep;
  ep.reply({200, R"({"ret":0})", "application/json", true});  // holds the answer past timeout_ms
  ChannelConfig cfg = webhook(ep.url());
  cfg.connect_timeout_ms = 300;
  cfg.timeout_ms = 300;
  WebhookClient c(cfg, kSecret);
  Result r = c.post(request("B-TIMEOUT"));
  CHECK(r.outcome == Outcome::unknown);
  CHECK(r.code == "timeout");
  // the endpoint did receive it: exactly why a timeout is never "failed"
  REQUIRE(ep.wait_for_requests(1));

  ep.reply({200, R"({"ret":0})", "application/json", false});
  cfg.connect_timeout_ms = 10000;
  cfg.timeout_ms = 20000;
  WebhookClient again(cfg, kSecret);
  CHECK(again.post(request("B-TIMEOUT")).outcome == Outcome::success);
  auto seen = ep.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].body == seen[1].body);
  CHECK(seen[1].body.find(R"("bill_no":"B-TIMEOUT")") != std::string::npos);
  CHECK(seen[0].signature_ok);
  CHECK(seen[1].signature_ok);
}

TEST_CASE("webhook connection refused is unknown, never failed") {
  RefusingPort p;
  WebhookClient c(webhook("http://127.0.0.1:" + std::to_string(p.port) + "/hook"), kSecret);
  Result r = c.post(request());
  CHECK(r.outcome == Outcome::unknown);
  CHECK(r.code == "connect_failed");
  CHECK_FALSE(r.message.empty());
}

TEST_CASE("webhook DNS failure is unknown") {
  // .invalid never resolves (RFC 6761)
  ChannelConfig cfg = webhook("http://rewardctl-test.invalid/hook");
  cfg.connect_timeout_ms = cfg.timeout_ms = 2000;  // a resolver that hangs instead: a timeout, also unknown
  WebhookClient c(cfg, kSecret);
  Result r = c.post(request());
  CHECK(r.outcome == Outcome::unknown);
  CHECK((r.code == "dns" || r.code == "timeout"));
}

TEST_CASE("webhook the same bill number sent twice arrives unchanged twice") {
  Endpoint ep;
  WebhookClient c(webhook(ep.url()), kSecret);
  CHECK(c.post(request("B-DUP")).outcome == Outcome::success);
  CHECK(c.post(request("B-DUP")).outcome == Outcome::success);
  auto seen = ep.seen();
  REQUIRE(seen.size() == 2);
  for (const auto& s : seen) {
    CHECK(s.body == WebhookClient::body(request("B-DUP")));
    CHECK(s.signature_ok);
  }
  // one CURL handle: both requests travelled on the same kept-alive connection
  CHECK(seen[0].remote_port == seen[1].remote_port);
}

TEST_CASE("webhook client is movable and keeps working after a move") {
  Endpoint ep;
  WebhookClient a(webhook(ep.url()), kSecret);
  WebhookClient b(std::move(a));
  CHECK(b.post(request()).outcome == Outcome::success);
  WebhookClient c(webhook(ep.url()), "other");
  c = std::move(b);
  CHECK(c.post(request()).outcome == Outcome::success);
  auto seen = ep.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1].signature_ok);  // c now holds b's (correct) secret
}

// ---------------------------------------------------------------------------------------------
// the rate limiter, with an injected clock (no wall-clock assertions)

TEST_CASE("webhook rate limiter: unlimited when rate is 0") {
  RateLimiter l(0);
  auto t = RateLimiter::clock::time_point{} + 5s;
  for (int i = 0; i < 100; ++i) CHECK(l.acquire(t) == t);
}

TEST_CASE("webhook rate limiter: at most N starts in a second, then the next second") {
  RateLimiter l(5);
  const auto t0 = RateLimiter::clock::time_point{} + 100s;
  for (int i = 0; i < 5; ++i) CHECK(l.acquire(t0) == t0);           // a burst of 5 starts now
  for (int i = 0; i < 5; ++i) CHECK(l.acquire(t0) == t0 + 1s);      // the next 5 one second later
  CHECK(l.acquire(t0) == t0 + 2s);
  // after a quiet spell the full burst is available again
  const auto t1 = t0 + 10s;
  for (int i = 0; i < 5; ++i) CHECK(l.acquire(t1 + i * 1ms) == t1 + i * 1ms);
  CHECK(l.acquire(t1 + 5ms) == t1 + 1s);  // 6th within the second waits for the 1st to age out
  CHECK(l.acquire(t1 + 5ms) == t1 + 1ms + 1s);
}

TEST_CASE("webhook rate limiter: random arrivals never exceed N per sliding second and never wait needlessly") {
  for (int n : {1, 3, 7}) {
    CAPTURE(n);
    RateLimiter l(n);
    std::mt19937 gen(12345u + unsigned(n));
    std::uniform_int_distribution<int> gap_ms(0, 700);
    auto arrival = RateLimiter::clock::time_point{} + 1000s;
    std::vector<RateLimiter::clock::time_point> starts;
    for (int i = 0; i < 2000; ++i) {
      arrival += std::chrono::milliseconds(gap_ms(gen));
      auto s = l.acquire(arrival);
      CHECK(s >= arrival);
      if (!starts.empty()) CHECK(s >= starts.back());  // FIFO order
      if (starts.size() >= size_t(n)) CHECK(s - starts[starts.size() - size_t(n)] >= 1s);
      if (s > arrival) {  // a wait is only ever up to the moment the window allows a start
        bool after_prev = !starts.empty() && s == starts.back();
        bool window = starts.size() >= size_t(n) && s == starts[starts.size() - size_t(n)] + 1s;
        CHECK((after_prev || window));
      }
      starts.push_back(s);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// [channels.NAME] parsing

namespace {

Settings settings_from(const std::string& doc, const std::string& path = "channels.toml") {
  Settings s;
  s.file = toml::parse(std::string_view(doc), std::string_view(path));
  s.config_path = path;
  return s;
}

// The Error(config) message parse_channels throws for the document.
std::string channel_error(const std::string& doc) {
  Settings s = settings_from(doc);
  try {
    (void)parse_channels(s);
  } catch (const Error& e) {
    CHECK(e.kind() == Errc::config);
    return e.what();
  }
  FAIL("parse_channels accepted a bad config");
  return "";
}

const std::string kHook = "[channels.hook]\ntype = \"webhook\"\nurl = \"https://example.test/deliver\"\n"
                          "secret = \"env:REWARD_WEBHOOK_SECRET\"\n";

}  // namespace

TEST_CASE("channel config: built-ins exist without configuration") {
  for (const std::string& doc : {std::string(""), std::string("[channels]\n")}) {
    auto m = parse_channels(settings_from(doc));
    REQUIRE(m.size() == 2);
    CHECK(m.at("ledger").type == "ledger");
    CHECK(m.at("outbox").type == "outbox");
    CHECK(m.at("ledger").name == "ledger");
  }
}

TEST_CASE("channel config: a good file") {
  std::string doc =
      "[channels.hook]\n"
      "type = \"webhook\"\n"
      "url = \"https://wallet.example.test/api/deliver\"\n"
      "secret = \"env:REWARD_WEBHOOK_SECRET\"\n"
      "connect_timeout_ms = 500\n"
      "timeout_ms = 2500\n"
      "retryable_rets = [1001, -3]\n"
      "rate_per_second = 50\n"
      "signature_header = \"X-Sig\"\n"
      "\n"
      "[channels.minimal]\n"
      "type = \"webhook\"\n"
      "url = \"http://10.0.0.5:8080/hook\"\n"
      "secret = \"file:/run/secrets/hook\"\n"
      "timeout_ms = 400\n"
      "\n"
      "[channels.points]\n"
      "type = \"ledger\"\n"
      "\n"
      "[channels.ledger]\n"
      "type = \"ledger\"\n";
  auto m = parse_channels(settings_from(doc));
  REQUIRE(m.size() == 5);
  const auto& h = m.at("hook");
  CHECK(h.name == "hook");
  CHECK(h.type == "webhook");
  CHECK(h.url == "https://wallet.example.test/api/deliver");
  CHECK(h.secret_ref == "env:REWARD_WEBHOOK_SECRET");
  CHECK(h.connect_timeout_ms == 500);
  CHECK(h.timeout_ms == 2500);
  CHECK(h.retryable_rets == std::vector<int64_t>{1001, -3});
  CHECK(h.rate_per_second == 50);
  CHECK(h.signature_header == "X-Sig");
  const auto& mn = m.at("minimal");
  CHECK(mn.secret_ref == "file:/run/secrets/hook");
  CHECK(mn.timeout_ms == 400);
  CHECK(mn.connect_timeout_ms == 400);  // the default connect timeout is capped by a shorter total
  CHECK(mn.retryable_rets.empty());
  CHECK(mn.rate_per_second == 0);
  CHECK(mn.signature_header == "X-Rewardctl-Signature");
  CHECK(m.at("points").type == "ledger");
  CHECK(m.at("ledger").type == "ledger");
  CHECK(m.at("outbox").type == "outbox");

  // the reference resolves later, through the config module
  std::map<std::string, std::string> env = {{"REWARD_WEBHOOK_SECRET", "topsecret"}};
  GetEnv getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK(resolve_secret(h.secret_ref, "channels.hook.secret", getenv) == "topsecret");
}

TEST_CASE("channel config: errors name file:line:column and the key") {
  SUBCASE("unknown key") {
    CHECK(channel_error(kHook + "retries = 3\n") == "channels.toml:5:1: unknown setting 'channels.hook.retries'");
  }
  SUBCASE("wrong type of a value") {
    CHECK(channel_error(kHook + "timeout_ms = \"3000\"\n") ==
          "channels.toml:5:14: 'channels.hook.timeout_ms' must be an integer");
    CHECK(channel_error(kHook + "signature_header = 7\n") ==
          "channels.toml:5:20: 'channels.hook.signature_header' must be a string");
    CHECK(channel_error("[channels.hook]\ntype = 1\n") == "channels.toml:2:8: 'channels.hook.type' must be a string");
  }
  SUBCASE("out of range") {
    CHECK(channel_error(kHook + "rate_per_second = -1\n") ==
          "channels.toml:5:19: 'channels.hook.rate_per_second' must be between 0 and 100000");
    CHECK(channel_error(kHook + "timeout_ms = 0\n") ==
          "channels.toml:5:14: 'channels.hook.timeout_ms' must be between 1 and 600000");
    CHECK(channel_error(kHook + "connect_timeout_ms = 5000\ntimeout_ms = 3000\n") ==
          "channels.toml:5:22: 'channels.hook.connect_timeout_ms' (5000) must not exceed "
          "'channels.hook.timeout_ms' (3000)");
  }
  SUBCASE("retryable_rets") {
    CHECK(channel_error(kHook + "retryable_rets = 1001\n") ==
          "channels.toml:5:18: 'channels.hook.retryable_rets' must be an array of integers");
    CHECK(channel_error(kHook + "retryable_rets = [1001, \"1002\"]\n") ==
          "channels.toml:5:25: 'channels.hook.retryable_rets' must be an array of integers");
    CHECK(channel_error(kHook + "retryable_rets = [0]\n") ==
          "channels.toml:5:19: 'channels.hook.retryable_rets' must not contain 0: ret 0 is success");
  }
  SUBCASE("missing required keys") {
    CHECK(channel_error("[channels.hook]\nurl = \"https://x.test/\"\n") ==
          "channels.toml:1:1: 'channels.hook.type' is required (ledger, outbox or webhook)");
    CHECK(channel_error("\n[channels.hook]\ntype = \"webhook\"\nsecret = \"env:S\"\n") ==
          "channels.toml:2:1: 'channels.hook.url' is required for a webhook channel");
    CHECK(channel_error("[channels.hook]\ntype = \"webhook\"\nurl = \"https://x.test/\"\n") ==
          "channels.toml:1:1: 'channels.hook.secret' is required for a webhook channel (env:NAME or file:PATH)");
  }
  SUBCASE("bad values") {
    CHECK(channel_error("[channels.hook]\ntype = \"sms\"\n") ==
          "channels.toml:2:8: 'channels.hook.type' must be one of ledger|outbox|webhook, not 'sms'");
    CHECK(channel_error("[channels.hook]\ntype = \"webhook\"\nurl = \"ftp://x.test/\"\nsecret = \"env:S\"\n") ==
          "channels.toml:3:7: 'channels.hook.url' must be an http:// or https:// URL");
    CHECK(channel_error("[channels.hook]\ntype = \"webhook\"\nurl = \"https:///p\"\nsecret = \"env:S\"\n") ==
          "channels.toml:3:7: 'channels.hook.url' has no host");
    CHECK(channel_error("[channels.hook]\ntype = \"webhook\"\nurl = \"https://u:pw@x.test/\"\nsecret = \"env:S\"\n") ==
          "channels.toml:3:7: 'channels.hook.url' holds a password: put credentials in the secret, not in the URL");
    CHECK(channel_error(kHook + "signature_header = \"X Sig\"\n") ==
          "channels.toml:5:20: 'channels.hook.signature_header' must be an HTTP header name (letters, digits, '-')");
    CHECK(channel_error(kHook + "signature_header = \"content-type\"\n") ==
          "channels.toml:5:20: 'channels.hook.signature_header' must not be 'content-type'");
  }
  SUBCASE("shape and names") {
    CHECK(channel_error("[channels]\nhook = 5\n") == "channels.toml:2:8: 'channels.hook' must be a table");
    CHECK(channel_error("[channels.\"a b\"]\ntype = \"ledger\"\n") ==
          "channels.toml:1:11: channel name 'a b' must be 1 to 64 letters, digits, '_' or '-'");
    CHECK(channel_error("[channels.points]\ntype = \"ledger\"\nurl = \"https://x.test/\"\n") ==
          "channels.toml:3:1: 'channels.points.url' applies only to webhook channels, not to type ledger");
    CHECK(channel_error("[channels.outbox]\ntype = \"webhook\"\n") ==
          "channels.toml:2:8: 'channels.outbox' is a built-in channel of type outbox; it cannot be redefined as "
          "webhook");
  }
}

TEST_CASE("channel config: a literal secret is refused and never echoed") {
  for (const std::string lit : {"hunter2-literal", "env:", "file:", "ENV:X"}) {
    CAPTURE(lit);
    std::string msg = channel_error("[channels.hook]\ntype = \"webhook\"\nurl = \"https://x.test/\"\nsecret = \"" +
                                    lit + "\"\n");
    CHECK(msg ==
          "channels.toml:4:10: 'channels.hook.secret' must be a reference such as env:NAME or file:PATH, not a "
          "literal secret");
    if (lit.size() > 5) CHECK(msg.find(lit) == std::string::npos);
  }
}

TEST_CASE("channel config: examples/rewardctl.toml loads and defines the wallet webhook") {
  std::string src = __FILE__;
  std::string path = src.substr(0, src.rfind("tests/unit/")) + "examples/rewardctl.toml";
  Overrides flags;
  flags.config = path;
  GetEnv getenv = [](const char* n) -> const char* { return std::string(n) == "USER" ? "tester" : nullptr; };
  Settings s = load_settings(flags, getenv);
  auto m = parse_channels(s);
  REQUIRE(m.count("wallet"));
  CHECK(m.at("wallet").type == "webhook");
  CHECK(m.at("wallet").secret_ref == "env:REWARD_WEBHOOK_SECRET");
  CHECK(m.at("wallet").url.rfind("https://", 0) == 0);
  CHECK(m.count("ledger"));
  CHECK(m.count("outbox"));
}
