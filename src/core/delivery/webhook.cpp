// The webhook delivery channel (DESIGN §5): a signed HTTP POST over libcurl, classified into
// success / failed / retryable / unknown. A timeout or any transport error is *unknown*, never
// failed: the engine resends with the same bill number and the downstream dedupes on it.
#include <curl/curl.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/delivery/channel.hpp"
#include "base/error.hpp"
#include "util/hash.hpp"

namespace rc::delivery {

namespace {

constexpr size_t kMaxResponse = 64 * 1024;  // we only need {ret, errmsg}; the rest is dropped
constexpr size_t kMaxMessage = 256;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      throw Error(Errc::internal, "curl_global_init failed");
  });
}

size_t on_write(char* p, size_t size, size_t n, void* user) {
  auto* out = static_cast<std::string*>(user);
  size_t len = size * n;
  if (out->size() < kMaxResponse) out->append(p, std::min(len, kMaxResponse - out->size()));
  return len;  // keep reading (and discarding) so the connection stays reusable
}

// A raw response snippet for a message: printable ASCII only, bounded.
std::string snippet(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (o.size() >= kMaxMessage) break;
    o += (c >= 0x20 && c < 0x7f) ? char(c) : '?';
  }
  return o;
}

// Valid UTF-8 (it came from a JSON parser) cut at a character boundary.
std::string bounded(std::string s) {
  if (s.size() <= kMaxMessage) return s;
  size_t n = kMaxMessage;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s;
}

Result transport_error(CURLcode rc, const char* errbuf) {
  std::string code;
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT: code = "timeout"; break;
    case CURLE_COULDNT_CONNECT: code = "connect_failed"; break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: code = "dns"; break;
    default: code = "curl_" + std::to_string(int(rc)); break;
  }
  std::string msg = (errbuf && *errbuf) ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
  return {Outcome::unknown, code, snippet(msg)};
}

template <class T>
void set(CURL* h, CURLoption opt, T value) {
  if (curl_easy_setopt(h, opt, value) != CURLE_OK)
    throw Error(Errc::internal, "curl_easy_setopt(" + std::to_string(int(opt)) + ") failed");
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::success: return "success";
    case Outcome::failed: return "failed";
    case Outcome::retryable: return "retryable";
    case Outcome::unknown: return "unknown";
  }
  return "unknown";
}

RateLimiter::clock::time_point RateLimiter::acquire(clock::time_point now) {
  if (per_second_ <= 0) return now;
  clock::time_point start = now;
  if (!starts_.empty()) start = std::max(start, starts_.back());
  if (starts_.size() >= size_t(per_second_)) {
    // the start per_second_ places back must be at least one second earlier
    start = std::max(start, starts_[starts_.size() - size_t(per_second_)] + std::chrono::seconds(1));
  }
  starts_.push_back(start);
  while (starts_.size() > size_t(per_second_)) starts_.pop_front();
  return start;
}

std::string WebhookClient::body(const Request& r) {
  nlohmann::ordered_json j;  // insertion order: seq, bill_no, user_id, item, amount
  j["seq"] = r.seq;
  j["bill_no"] = r.bill_no;
  j["user_id"] = r.user_id;
  j["item"] = r.item;
  j["amount"] = r.amount;
  try {
    return j.dump();
  } catch (const nlohmann::json::type_error&) {
    throw Error(Errc::bad_input, "delivery request seq " + std::to_string(r.seq) +
                                     " holds a string that is not valid UTF-8 (bill_no, user_id or item)");
  }
}

WebhookClient::WebhookClient(ChannelConfig cfg, std::string secret)
    : cfg_(std::move(cfg)), secret_(std::move(secret)), limiter_(cfg_.rate_per_second) {
  if (cfg_.type != "webhook")
    throw Error(Errc::config, "channel " + cfg_.name + " is of type " + cfg_.type + ", not webhook");
  if (secret_.empty()) throw Error(Errc::config, "channel " + cfg_.name + ": the webhook secret is empty");
  global_init();
  CURL* h = curl_easy_init();
  if (!h) throw Error(Errc::internal, "curl_easy_init failed");
  curl_ = h;
  try {
    set(h, CURLOPT_URL, cfg_.url.c_str());
    set(h, CURLOPT_PROTOCOLS_STR, "http,https");
    set(h, CURLOPT_POST, 1L);
    set(h, CURLOPT_NOSIGNAL, 1L);
    set(h, CURLOPT_CONNECTTIMEOUT_MS, long(cfg_.connect_timeout_ms));
    set(h, CURLOPT_TIMEOUT_MS, long(cfg_.timeout_ms));
    set(h, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect is a non-2xx answer, not something to chase
    set(h, CURLOPT_USERAGENT, "rewardctl/" REWARDCTL_VERSION);
    set(h, CURLOPT_WRITEFUNCTION, &on_write);
  } catch (...) {
    curl_easy_cleanup(h);
    curl_ = nullptr;
    throw;
  }
}

WebhookClient::~WebhookClient() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
  if (!secret_.empty()) OPENSSL_cleanse(secret_.data(), secret_.size());
}

WebhookClient::WebhookClient(WebhookClient&& o) noexcept
    : cfg_(std::move(o.cfg_)),
      secret_(std::move(o.secret_)),
      curl_(std::exchange(o.curl_, nullptr)),
      limiter_(std::move(o.limiter_)) {}

WebhookClient& WebhookClient::operator=(WebhookClient&& o) noexcept {
  if (this != &o) {
    if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
    if (!secret_.empty()) OPENSSL_cleanse(secret_.data(), secret_.size());
    cfg_ = std::move(o.cfg_);
    secret_ = std::move(o.secret_);
    curl_ = std::exchange(o.curl_, nullptr);
    limiter_ = std::move(o.limiter_);
  }
  return *this;
}

Result WebhookClient::post(const Request& r) {
  if (!curl_) throw Error(Errc::internal, "WebhookClient used after it was moved from");
  std::string payload;
  try {
    payload = body(r);
  } catch (const Error& e) {
    return {Outcome::failed, "invalid_request", e.what()};  // nothing was sent; resending cannot help
  }
  const std::string sig_line = cfg_.signature_header + ": sha256=" + hmac_sha256_hex(secret_, payload);

  std::this_thread::sleep_until(limiter_.acquire(RateLimiter::clock::now()));

  CURL* h = static_cast<CURL*>(curl_);
  curl_slist* raw = nullptr;
  for (const char* line : {"Content-Type: application/json", "Accept: application/json", "Expect:"}) {
    curl_slist* next = curl_slist_append(raw, line);
    if (!next) {
      curl_slist_free_all(raw);
      throw Error(Errc::internal, "out of memory building webhook headers");
    }
    raw = next;
  }
  if (curl_slist* next = curl_slist_append(raw, sig_line.c_str())) raw = next;
  else {
    curl_slist_free_all(raw);
    throw Error(Errc::internal, "out of memory building webhook headers");
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(raw, &curl_slist_free_all);

  std::string response;
  char errbuf[CURL_ERROR_SIZE];
  errbuf[0] = '\0';
  set(h, CURLOPT_HTTPHEADER, headers.get());
  set(h, CURLOPT_POSTFIELDS, payload.data());
  set(h, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(payload.size()));
  set(h, CURLOPT_WRITEDATA, &response);
  set(h, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode rc = curl_easy_perform(h);
  long status = 0;
  if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  // The handle outlives this call: drop the pointers to locals (POSTFIELDS is set anew every call).
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(nullptr));
  curl_easy_setopt(h, CURLOPT_WRITEDATA, static_cast<void*>(nullptr));
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, static_cast<char*>(nullptr));

  if (rc != CURLE_OK) return transport_error(rc, errbuf);
  if (status < 200) return {Outcome::unknown, "no_status", "no final HTTP status"};

  const std::string http = "http_" + std::to_string(status);
  if (status >= 300) {
    Outcome o = (status >= 500 || status == 429) ? Outcome::retryable : Outcome::failed;
    return {o, http, snippet(response)};
  }

  // 2xx: the answer is the JSON {ret, errmsg}. Anything else means we cannot tell what happened.
  nlohmann::json j = nlohmann::json::parse(response, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return {Outcome::unknown, "bad_response", http + " without a JSON object: " + snippet(response)};
  auto it = j.find("ret");
  if (it == j.end() || !it->is_number_integer())
    return {Outcome::unknown, "bad_response", http + " without an integer ret: " + snippet(response)};
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    return {Outcome::unknown, "bad_response", http + " with ret out of range: " + snippet(response)};
  const int64_t ret = it->get<int64_t>();

  std::string msg;
  if (auto e = j.find("errmsg"); e != j.end() && !e->is_null())
    msg = bounded(e->is_string() ? e->get<std::string>()
                                 : e->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));

  Outcome o = Outcome::failed;
  if (ret == 0) o = Outcome::success;
  else if (std::find(cfg_.retryable_rets.begin(), cfg_.retryable_rets.end(), ret) != cfg_.retryable_rets.end())
    o = Outcome::retryable;
  return {o, std::to_string(ret), msg};
}

}  // namespace rc::delivery
