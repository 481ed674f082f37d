// The reader of definition files: see definition_reader.hpp.
#include "core/activity/definition_reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/clock.hpp"
#include "core/identifier.hpp"
#include "util/text_distance.hpp"

namespace rc::activity::reader {

using util::did_you_mean;

const std::vector<std::string> kTopKeys = {"code",   "name",  "kind",      "timezone", "start",  "end",
                                           "whitelist_required", "budget_cents", "budget", "limit", "gray",
                                           "blacklist", "items", "prizes", "lottery", "fuse"};
const std::vector<std::string> kLimitKeys = {"count", "period"};
const std::vector<std::string> kUsersKeys = {"users"};
const std::vector<std::string> kItemKeys = {"kind", "unit_cost_cents", "channel", "max_amount"};
const std::vector<std::string> kPrizeKeys = {"code",   "item",          "amount", "amount_min",    "amount_max",
                                             "stock",  "stock_buckets", "weight", "validity_days", "limit",
                                             "high_value"};
const std::vector<std::string> kBudgetKeys = {"warn_at", "degrade_at", "stop_at"};
const std::vector<std::string> kLotteryKeys = {"consolation", "guarantees"};
const std::vector<std::string> kGuaranteeKeys = {"nth", "prize"};
const std::vector<std::string> kFuseKeys = {"name",        "prize",       "window_seconds", "max_count",
                                            "max_amount_cents", "pop_percent", "dod_percent",   "min_count"};
const std::vector<std::string> kItemKinds = {"cash", "coupon", "points", "virtual", "physical"};

// Where a key belongs, for "unknown key" findings that are really a key in the wrong table (the
// classic TOML slip: a top-level key written below a [table] header belongs to that table).
static std::string home_of(const std::string& key) {
  auto in = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), key) != v.end(); };
  if (in(kTopKeys)) return "the top level";
  if (in(kPrizeKeys)) return "[[prizes]]";
  if (in(kItemKeys)) return "[items.CODE]";
  if (in(kFuseKeys)) return "[[fuse]]";
  if (in(kLotteryKeys)) return "[lottery]";
  if (in(kBudgetKeys)) return "[budget]";
  if (in(kGuaranteeKeys)) return "[[lottery.guarantees]]";
  if (in(kLimitKeys)) return "[limit] or [prizes.limit]";
  if (in(kUsersKeys)) return "[gray] or [blacklist]";
  return "";
}

std::string join(const std::string& prefix, const std::string& key) { return prefix.empty() ? key : prefix + "." + key; }
std::string index(const std::string& prefix, size_t i) { return prefix + "[" + std::to_string(i) + "]"; }

const char* type_desc(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "nothing";
  }
}

std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// A code an operator probably meant: lower case, anything else as '_', at most 64 characters.
static std::string sanitized_code(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 'A' && c <= 'Z') out += char(c - 'A' + 'a');
    else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-') out += char(c);
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.size() > 64) out.resize(64);
  return out;
}

void Parser::add(const std::string& code, const std::string& path, const std::string& msg,
                 const toml::source_region& r) {
  Finding f;
  f.code = code;
  f.severity = Severity::error;
  f.path = path;
  f.message = one_line(msg);
  f.line = int(r.begin.line);
  f.column = int(r.begin.column);
  findings.push_back(std::move(f));
}

void Parser::keys(const toml::table& t, const std::string& path, const std::vector<std::string>& known,
          const std::string& where) {
  for (auto&& [k, v] : t) {
    (void)v;
    std::string key(k.str());
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string msg = "unknown key '" + key + "' in " + where;
    std::string guess = did_you_mean(key, known);
    std::string home = home_of(key);
    if (!guess.empty()) msg += ": did you mean '" + guess + "'?";
    else if (home == "the top level")
      msg += ": '" + key + "' is a top-level key; keys written below a [table] header belong to that table, "
             "so move it above the first [table] header";
    else if (!home.empty()) msg += ": '" + key + "' is a key of " + home + ", move it there";
    else {
      std::string list;
      for (auto& s : known) list += (list.empty() ? "" : ", ") + s;
      msg += ": remove it (known keys: " + list + ")";
    }
    add("unknown_key", join(path, key), msg, k.source());
  }
}

void Parser::missing(const toml::node& parent, const std::string& path, const std::string& what) {
  add("missing_field", path, "'" + path + "' is required: " + what,
      path.find_first_of(".[") == std::string::npos ? toml::source_region{} : parent.source());
}

std::optional<std::string> Parser::str(const toml::table& t, const char* key, const std::string& path, bool required,
                               const std::string& what) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (required) missing(t, path, what.empty() ? "add it as a string" : what);
    return std::nullopt;
  }
  if (!n->is_string()) {
    add("wrong_type", path, "'" + path + "' must be a string, not " + type_desc(*n), n->source());
    return std::nullopt;
  }
  std::string v(n->value_or(std::string_view{}));
  if (!no_control_chars(v, path, n->source())) return std::nullopt;
  return v;
}

bool Parser::no_control_chars(const std::string& v, const std::string& path, const toml::source_region& where) {
  for (size_t i = 0; i < v.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(v[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "%02X", unsigned(c));
      add("control_char", path, "'" + path + "' holds the control character U+00" + buf + " at byte " +
                                    std::to_string(i + 1) + ": text fields may not contain control characters",
          where);
      return false;
    }
  }
  return true;
}

std::optional<bool> Parser::boolean(const toml::table& t, const char* key, const std::string& path) {
  const toml::node* n = t.get(key);
  if (!n) return std::nullopt;
  if (!n->is_boolean()) {
    add("wrong_type", path, "'" + path + "' must be true or false, not " + type_desc(*n), n->source());
    return std::nullopt;
  }
  return n->value_or(false);
}

std::optional<int64_t> Parser::integer(const toml::table& t, const char* key, const std::string& path, bool required,
                               Num kind, const std::string& what) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (required) missing(t, path, what.empty() ? "add it as an integer" : what);
    return std::nullopt;
  }
  if (n->is_floating_point()) {
    double v = n->value_or(0.0);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    std::string msg = "'" + path + "' is a float (" + buf + "): ";
    if (kind == Num::amount)
      msg += "amounts are integer cents/units, not floats (for a cash item 1.50 yuan is written 150)";
    else if (kind == Num::weight)
      msg += "weights are integers relative to the other prizes' weights (0.5% of 1000 is written 5)";
    else
      msg += "write a whole number";
    add("wrong_type", path, msg, n->source());
    return std::nullopt;
  }
  if (!n->is_integer()) {
    add("wrong_type", path, "'" + path + "' must be an integer, not " + type_desc(*n), n->source());
    return std::nullopt;
  }
  int64_t v = n->value_or(int64_t{0});
  if (kind != Num::any && v < 0) {
    add("negative_amount", path, "'" + path + "' is negative (" + std::to_string(v) + "): it must be " +
                                     (kind == Num::positive ? "at least 1" : "zero or more"),
        n->source());
    return std::nullopt;
  }
  if (kind == Num::positive && v == 0) {
    add("bad_value", path, "'" + path + "' is 0: it must be at least 1 (or leave the key out)", n->source());
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> Parser::ratio(const toml::table& t, const char* key, const std::string& path) {
  const toml::node* n = t.get(key);
  if (!n) return std::nullopt;
  double v = 0;
  if (n->is_floating_point()) v = n->value_or(0.0);
  else if (n->is_integer()) v = double(n->value_or(int64_t{0}));
  else {
    add("wrong_type", path, "'" + path + "' must be a number such as 0.8 (a ratio of the budget), not " + type_desc(*n),
        n->source());
    return std::nullopt;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  if (!(v > 0 && v <= 1)) {  // also refuses nan
    add("bad_value", path, "'" + path + "' is " + buf + ": a ratio of consumed over authorised budget, above 0 and "
                           "at most 1 (0.8 is 80% consumed)", n->source());
    return std::nullopt;
  }
  const int64_t ppm = std::llround(v * double(kPpm));
  if (ppm < 1) {
    add("bad_value", path, "'" + path + "' is " + buf + ": the smallest ratio is 0.000001", n->source());
    return std::nullopt;
  }
  return ppm;
}

std::string Parser::code(const toml::table& t, const char* key, const std::string& path, const std::string& what) {
  auto s = str(t, key, path, true, "add the " + what + " code, e.g. \"spring_2025\" (a-z 0-9 _ -)");
  if (!s) return "";
  if (!valid_code(*s)) bad_code(path, *s, what, t.get(key)->source());
  return *s;
}

void Parser::bad_code(const std::string& path, const std::string& s, const std::string& what,
                      const toml::source_region& r) {
  std::string fix = sanitized_code(s);
  add("bad_code", path,
      what + " code '" + s + "' may hold only a-z, 0-9, _ and - (1 to 64 characters)" +
          (fix.empty() || fix == s ? std::string(": choose another") : ": for example '" + fix + "'"),
      r);
}

const toml::table* Parser::table(const toml::table& t, const char* key, const std::string& path,
                                 const std::string& how) {
  const toml::node* n = t.get(key);
  if (!n) return nullptr;
  if (!n->is_table()) {
    add("wrong_type", path, "'" + path + "' must be a table (" + how + "), not " + type_desc(*n), n->source());
    return nullptr;
  }
  return n->as_table();
}

std::optional<LimitSpec> Parser::limit(const toml::table& parent, const std::string& path) {
  const toml::table* t = table(parent, "limit", path, "count = N, period = \"total\"|\"day\"|\"week\"|\"month\"");
  if (!t) return std::nullopt;
  keys(*t, path, kLimitKeys, "[" + path + "]");
  LimitSpec l;
  auto c = integer(*t, "count", join(path, "count"), true, Num::positive, "how many times one user may claim");
  auto p = str(*t, "period", join(path, "period"), false);
  if (p) {
    if (auto pp = parse_period(*p)) l.period = *pp;
    else {
      add("bad_value", join(path, "period"),
          "'" + join(path, "period") + "' is '" + *p + "': use total, day, week or month (in the activity's timezone)",
          t->get("period")->source());
      return std::nullopt;
    }
  }
  if (!c) return std::nullopt;
  l.count = *c;
  return l;
}

std::vector<std::string> Parser::users(const toml::table& parent, const char* key) {
  std::vector<std::string> out;
  std::string path = key;
  const toml::table* t = table(parent, key, path, "users = [\"u1\", \"u2\"]");
  if (!t) return out;
  keys(*t, path, kUsersKeys, "[" + path + "]");
  const toml::node* n = t->get("users");
  if (!n) return out;
  const toml::array* a = n->as_array();
  std::string up = join(path, "users");
  if (!a) {
    add("wrong_type", up, "'" + up + "' must be an array of user ids, not " + type_desc(*n), n->source());
    return out;
  }
  for (size_t i = 0; i < a->size(); ++i) {
    const toml::node& el = *a->get(i);
    auto s = el.value<std::string>();
    if (!el.is_string() || !s) {
      add("wrong_type", index(up, i), "'" + index(up, i) + "' must be a user id string, not " + type_desc(el),
          el.source());
      continue;
    }
    // the identifier rules of every other edge (claim flags, CSV rows): trimmed, then checked
    std::string id = trim_identifier(*s);
    std::string why = identifier_error(id, IdKind::user, "'" + index(up, i) + "'");
    if (!why.empty()) {
      add("bad_user_id", index(up, i), why + ": user ids are 1 to " + std::to_string(kMaxUserIdBytes) +
                                           " bytes of UTF-8 in Unicode NFC without control or invisible characters",
          el.source());
      continue;
    }
    out.push_back(id);
  }
  return out;
}

std::optional<Millis> Parser::time(const toml::table& t, const char* key, const std::string& zone) {
  std::string path = key;
  const toml::node* n = t.get(key);
  if (!n) {
    missing(t, path, "add it as an offset date-time such as 2025-11-01T00:00:00+08:00");
    return std::nullopt;
  }
  std::string text;
  if (n->is_date_time()) {
    auto dt = *n->value<toml::date_time>();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03d", int(dt.date.year), int(dt.date.month),
                  int(dt.date.day), int(dt.time.hour), int(dt.time.minute), int(dt.time.second),
                  int(dt.time.nanosecond / 1000000));
    text = buf;
    if (!dt.offset) {
      add("bad_time", path, no_offset_message(path, text.substr(0, 19), zone), n->source());
      return std::nullopt;
    }
    int off = dt.offset->minutes;
    std::snprintf(buf, sizeof buf, "%c%02d:%02d", off < 0 ? '-' : '+', std::abs(off) / 60, std::abs(off) % 60);
    text += buf;
  } else if (n->is_string()) {
    text = std::string(n->value_or(std::string_view{}));
    if (auto ms = parse_rfc3339(text + "Z"); ms && text.size() >= 19) {
      add("bad_time", path, no_offset_message(path, text, zone), n->source());
      return std::nullopt;
    }
  } else if (n->is_date() || n->is_time()) {
    add("bad_time", path, "'" + path + "' is " + type_desc(*n) +
                              " only: write a date, a time and an offset, such as 2025-11-01T00:00:00+08:00",
        n->source());
    return std::nullopt;
  } else {
    add("wrong_type", path, "'" + path + "' must be an offset date-time such as 2025-11-01T00:00:00+08:00, not " +
                                type_desc(*n),
        n->source());
    return std::nullopt;
  }
  auto ms = parse_rfc3339(text);
  if (!ms) {
    add("bad_time", path,
        "'" + path + "' is '" + text + "', not an RFC 3339 date-time with an offset such as 2025-11-01T00:00:00+08:00",
        n->source());
    return std::nullopt;
  }
  return ms;
}

std::string Parser::no_offset_message(const std::string& path, const std::string& local, const std::string& zone) {
  std::string hint = local + "+08:00";
  if (!zone.empty() && zone_exists(zone)) {
    if (auto t = parse_rfc3339(local + "Z")) {
      std::string z = format_in_zone(*t, zone);  // the zone's offset near that moment
      if (z.size() >= 6) hint = local + z.substr(z.size() - 6) + " (" + zone + ")";
    }
  }
  return "'" + path + "' has no UTC offset (" + local + "): whose local time is it? write it with the offset, e.g. " +
         hint;
}

}  // namespace rc::activity::reader
