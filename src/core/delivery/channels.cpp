// [channels.NAME] tables of the config file (DESIGN §5). src/core/config.cpp only checks that
// `channels` is a table; everything inside it is checked here, with file:line:column messages.
#include <cctype>
#include <cstring>
#include <set>
#include <string_view>

#include "core/delivery/channel.hpp"
#include "base/error.hpp"

namespace rc::delivery {

namespace {

const std::set<std::string> kTypes = {"ledger", "outbox", "webhook"};
const std::set<std::string> kWebhookKeys = {"type",           "url",         "secret",
                                            "connect_timeout_ms", "timeout_ms", "retryable_rets",
                                            "rate_per_second", "signature_header"};

std::string at(const std::string& path, const toml::source_region& src) {
  const auto& b = src.begin;
  return (path.empty() ? std::string("config") : path) + ":" + std::to_string(b.line) + ":" +
         std::to_string(b.column);
}

[[noreturn]] void bad(const std::string& path, const toml::source_region& src, const std::string& msg) {
  throw Error(Errc::config, at(path, src) + ": " + msg);
}

std::string q(const std::string& s) { return "'" + s + "'"; }

bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (unsigned char c : n)
    if (!std::isalnum(c) && c != '_' && c != '-') return false;
  return true;
}

// An HTTP header field name: RFC 9110 token characters.
bool valid_header_name(const std::string& h) {
  if (h.empty()) return false;
  for (unsigned char c : h)
    if (!std::isalnum(c) && !std::strchr("!#$%&'*+-.^_`|~", c)) return false;
  return true;
}

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string get_string(const std::string& path, const toml::node& n, const std::string& name) {
  if (!n.is_string()) bad(path, n.source(), q(name) + " must be a string");
  return std::string(*n.value<std::string>());
}

int get_int(const std::string& path, const toml::node& n, const std::string& name, int64_t lo, int64_t hi) {
  if (!n.is_integer()) bad(path, n.source(), q(name) + " must be an integer");
  int64_t v = *n.value<int64_t>();
  if (v < lo || v > hi)
    bad(path, n.source(), q(name) + " must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return int(v);
}

void check_url(const std::string& path, const toml::node& n, const std::string& name, const std::string& url) {
  std::string l = lower(url);
  size_t rest = 0;
  if (l.rfind("http://", 0) == 0) rest = 7;
  else if (l.rfind("https://", 0) == 0) rest = 8;
  else bad(path, n.source(), q(name) + " must be an http:// or https:// URL");
  for (unsigned char c : url)
    if (c <= 0x20 || c == 0x7f) bad(path, n.source(), q(name) + " must not contain spaces or control characters");
  size_t end = url.find_first_of("/?#", rest);
  std::string authority = url.substr(rest, end == std::string::npos ? std::string::npos : end - rest);
  if (auto a = authority.rfind('@'); a != std::string::npos) {
    if (authority.substr(0, a).find(':') != std::string::npos)
      bad(path, n.source(), q(name) + " holds a password: put credentials in the secret, not in the URL");
    authority = authority.substr(a + 1);
  }
  if (authority.empty() || authority[0] == ':') bad(path, n.source(), q(name) + " has no host");
}

ChannelConfig parse_one(const std::string& path, const std::string& name, const toml::node& node,
                        const toml::source_region& key_src) {
  const std::string pre = "channels." + name;
  if (!valid_name(name))
    bad(path, key_src, "channel name " + q(name) + " must be 1 to 64 letters, digits, '_' or '-'");
  const toml::table* t = node.as_table();
  if (!t) bad(path, node.source(), q(pre) + " must be a table");

  ChannelConfig c;
  c.name = name;
  const toml::node* type = t->get("type");
  if (!type) bad(path, t->source(), q(pre + ".type") + " is required (ledger, outbox or webhook)");
  c.type = get_string(path, *type, pre + ".type");
  if (!kTypes.count(c.type))
    bad(path, type->source(), q(pre + ".type") + " must be one of ledger|outbox|webhook, not " + q(c.type));
  if ((name == "ledger" || name == "outbox") && c.type != name)
    bad(path, type->source(),
        q(pre) + " is a built-in channel of type " + name + "; it cannot be redefined as " + c.type);

  for (auto&& [k, v] : *t) {
    (void)v;
    std::string key(k.str());
    if (!kWebhookKeys.count(key)) bad(path, k.source(), "unknown setting " + q(pre + "." + key));
    if (c.type != "webhook" && key != "type")
      bad(path, k.source(), q(pre + "." + key) + " applies only to webhook channels, not to type " + c.type);
  }
  if (c.type != "webhook") return c;

  const toml::node* url = t->get("url");
  if (!url) bad(path, t->source(), q(pre + ".url") + " is required for a webhook channel");
  c.url = get_string(path, *url, pre + ".url");
  check_url(path, *url, pre + ".url", c.url);

  const toml::node* secret = t->get("secret");
  if (!secret) bad(path, t->source(), q(pre + ".secret") + " is required for a webhook channel (env:NAME or file:PATH)");
  c.secret_ref = get_string(path, *secret, pre + ".secret");
  // Never echo the value: it may be a secret pasted by mistake.
  bool is_ref = (c.secret_ref.rfind("env:", 0) == 0 && c.secret_ref.size() > 4) ||
                (c.secret_ref.rfind("file:", 0) == 0 && c.secret_ref.size() > 5);
  if (!is_ref)
    bad(path, secret->source(),
        q(pre + ".secret") + " must be a reference such as env:NAME or file:PATH, not a literal secret");

  const toml::node* cto = t->get("connect_timeout_ms");
  const toml::node* to = t->get("timeout_ms");
  if (cto) c.connect_timeout_ms = get_int(path, *cto, pre + ".connect_timeout_ms", 1, 600000);
  if (to) c.timeout_ms = get_int(path, *to, pre + ".timeout_ms", 1, 600000);
  if (c.connect_timeout_ms > c.timeout_ms) {
    if (cto)
      bad(path, cto->source(),
          q(pre + ".connect_timeout_ms") + " (" + std::to_string(c.connect_timeout_ms) + ") must not exceed " +
              q(pre + ".timeout_ms") + " (" + std::to_string(c.timeout_ms) + ")");
    c.connect_timeout_ms = c.timeout_ms;  // the default connect timeout never exceeds a shorter total
  }

  if (const toml::node* rr = t->get("retryable_rets")) {
    const toml::array* a = rr->as_array();
    if (!a) bad(path, rr->source(), q(pre + ".retryable_rets") + " must be an array of integers");
    for (const toml::node& e : *a) {
      if (!e.is_integer()) bad(path, e.source(), q(pre + ".retryable_rets") + " must be an array of integers");
      int64_t v = *e.value<int64_t>();
      if (v == 0) bad(path, e.source(), q(pre + ".retryable_rets") + " must not contain 0: ret 0 is success");
      c.retryable_rets.push_back(v);
    }
  }
  if (const toml::node* r = t->get("rate_per_second"))
    c.rate_per_second = get_int(path, *r, pre + ".rate_per_second", 0, 100000);
  if (const toml::node* h = t->get("signature_header")) {
    c.signature_header = get_string(path, *h, pre + ".signature_header");
    if (!valid_header_name(c.signature_header))
      bad(path, h->source(), q(pre + ".signature_header") + " must be an HTTP header name (letters, digits, '-')");
    static const std::set<std::string> reserved = {"content-type", "content-length", "host", "expect",
                                                   "transfer-encoding", "connection", "user-agent"};
    if (reserved.count(lower(c.signature_header)))
      bad(path, h->source(), q(pre + ".signature_header") + " must not be " + q(c.signature_header));
  }
  return c;
}

}  // namespace

std::map<std::string, ChannelConfig> parse_channels(const Settings& s) {
  std::map<std::string, ChannelConfig> out;
  for (const char* b : {"ledger", "outbox"}) {
    ChannelConfig c;
    c.name = b;
    c.type = b;
    out[b] = c;
  }
  const toml::node* chs = s.file.get("channels");
  if (!chs) return out;
  const toml::table* t = chs->as_table();
  if (!t) bad(s.config_path, chs->source(), "'channels' must be a table");
  for (auto&& [k, v] : *t) {
    std::string name(k.str());
    out[name] = parse_one(s.config_path, name, v, k.source());
  }
  return out;
}

}  // namespace rc::delivery
