#include "jobs/runtime/alert.hpp"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>

#include "base/error.hpp"
#include "util/hash.hpp"

namespace rc::jobs {

namespace {

[[noreturn]] void bad(const std::string& path, const toml::node& n, const std::string& msg) {
  const auto& b = n.source().begin;
  throw Error(Errc::config, path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " + msg);
}

std::string get_string(const std::string& path, const toml::table& t, const char* key) {
  auto* n = t.get(key);
  if (!n) return "";
  if (!n->is_string()) bad(path, *n, std::string("'alerts.") + key + "' must be a string");
  return std::string(*n->value<std::string>());
}

size_t discard(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

std::optional<AlertConfig> parse_alerts(const Settings& s) {
  const toml::node* node = s.file.get("alerts");
  if (!node) return std::nullopt;
  const std::string& path = s.config_path;
  const toml::table* t = node->as_table();
  if (!t) bad(path, *node, "'alerts' must be a table");
  for (auto&& [k, v] : *t) {
    (void)v;
    std::string key(k.str());
    if (key != "webhook" && key != "secret" && key != "timeout_ms" && key != "signature_header") {
      const auto& b = k.source().begin;
      throw Error(Errc::config, path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
                                    ": unknown setting 'alerts." + key + "'");
    }
  }
  AlertConfig c;
  c.url = get_string(path, *t, "webhook");
  c.secret_ref = get_string(path, *t, "secret");
  if (auto h = get_string(path, *t, "signature_header"); !h.empty()) c.signature_header = h;
  if (c.url.rfind("http://", 0) != 0 && c.url.rfind("https://", 0) != 0)
    bad(path, *t, "'alerts.webhook' must be an http:// or https:// URL");
  if (c.secret_ref.rfind("env:", 0) != 0 && c.secret_ref.rfind("file:", 0) != 0)
    bad(path, *t, "'alerts.secret' must be a reference such as env:NAME or file:PATH, not a literal secret");
  if (auto* n = t->get("timeout_ms")) {
    auto v = n->value<int64_t>();
    if (!n->is_integer() || !v || *v < 1 || *v > 60000) bad(path, *n, "'alerts.timeout_ms' must be 1 to 60000");
    c.timeout_ms = int(*v);
  }
  return c;
}

bool post_alert(const AlertConfig& cfg, const GetEnv& getenv, nlohmann::json body) {
  try {
    body["v"] = 1;
    const std::string payload = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const std::string secret = resolve_secret(cfg.secret_ref, "alerts.secret", getenv);
    const std::string sig = cfg.signature_header + ": sha256=" + hmac_sha256_hex(secret, payload);
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> h(curl_easy_init(), &curl_easy_cleanup);
    if (!h) throw Error(Errc::internal, "curl_easy_init failed");
    curl_slist* raw = curl_slist_append(nullptr, "Content-Type: application/json");
    raw = raw ? curl_slist_append(raw, sig.c_str()) : nullptr;
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(raw, &curl_slist_free_all);
    if (!headers) throw Error(Errc::internal, "out of memory building alert headers");
    curl_easy_setopt(h.get(), CURLOPT_URL, cfg.url.c_str());
    curl_easy_setopt(h.get(), CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h.get(), CURLOPT_TIMEOUT_MS, long(cfg.timeout_ms));
    curl_easy_setopt(h.get(), CURLOPT_CONNECTTIMEOUT_MS, long(std::min(cfg.timeout_ms, 1000)));
    curl_easy_setopt(h.get(), CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(h.get(), CURLOPT_POSTFIELDS, payload.c_str());
    curl_easy_setopt(h.get(), CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(payload.size()));
    curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, &discard);
    CURLcode rc = curl_easy_perform(h.get());
    long status = 0;
    if (rc == CURLE_OK) curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status < 200 || status >= 300) {
      spdlog::error("alert to {} not delivered: {}", cfg.url,
                    rc != CURLE_OK ? std::string(curl_easy_strerror(rc)) : "HTTP " + std::to_string(status));
      return false;
    }
    return true;
  } catch (const Error& e) {
    spdlog::error("alert to {} not sent: {}", cfg.url, e.what());
    return false;
  }
}

}  // namespace rc::jobs
