// parse_definition: TOML text -> Definition, strictly. Every problem becomes a Finding with a field
// path and the line/column toml++ recorded, so an operator can fix all of them in one pass instead of
// one per run. A definition is returned only when no error was found: nothing half-parsed ever
// reaches the database, the reviewers or the claim engine.
#include "core/activity/definition.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/identifier.hpp"
#include "util/checked_math.hpp"
#include "util/text_distance.hpp"

namespace rc::activity {

using util::did_you_mean;

const char* kind_name(Kind k) { return name(k); }

std::optional<Kind> parse_kind(const std::string& s) { return parse_state<Kind>(s); }

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::error: return "error";
    case Severity::warning: return "warning";
    case Severity::info: return "info";
  }
  return "?";
}

bool valid_code(const std::string& code) {
  if (code.empty() || code.size() > 64) return false;
  for (char c : code)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

bool has_errors(const std::vector<Finding>& f) {
  return std::any_of(f.begin(), f.end(), [](const Finding& x) { return x.severity == Severity::error; });
}

const ItemDef* Definition::item(const std::string& code) const {
  for (auto& i : items)
    if (i.code == code) return &i;
  return nullptr;
}

const PrizeDef* Definition::prize(const std::string& code) const {
  for (auto& p : prizes)
    if (p.code == code) return &p;
  return nullptr;
}

std::optional<DrawCost> expected_draw_cost(const Definition& d) {
  __int128 weights = 0, num = 0;
  for (auto& p : d.prizes)
    if (p.weight > 0) {
      weights += p.weight;
      num += __int128(p.weight) * d.max_cost_cents(p);
    }
  if (weights <= 0) return std::nullopt;
  DrawCost c;
  c.per_draw_cents = static_cast<int64_t>((2 * num + weights) / (2 * weights));
  if (d.budget_cents && num > 0)
    c.draws_covered = static_cast<int64_t>(std::min<__int128>(__int128(*d.budget_cents) * weights / num, INT64_MAX));
  return c;
}

int64_t Definition::max_cost_cents(const PrizeDef& p) const {
  const ItemDef* i = item(p.item);
  if (!i) return 0;
  return util::sat_mul(std::max(p.amount, p.amount_max.value_or(p.amount)), i->unit_cost_cents);
}

// ---------------------------------------------------------------- the parser
namespace {

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
std::string home_of(const std::string& key) {
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
std::string sanitized_code(const std::string& s) {
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

// How an integer field is checked.
enum class Num {
  amount,    // cents/units/stock/budget: >= 0, a float is the "not floats" mistake
  weight,    // lottery weight: >= 0 here (lint wants > 0), integers only
  positive,  // counts, days, seconds, caps: >= 1
  any,       // checked by lint (guarantee nth)
};

class Parser {
 public:
  std::vector<Finding> findings;

  void add(const std::string& code, const std::string& path, const std::string& msg, const toml::source_region& r) {
    Finding f;
    f.code = code;
    f.severity = Severity::error;
    f.path = path;
    f.message = one_line(msg);
    f.line = int(r.begin.line);
    f.column = int(r.begin.column);
    findings.push_back(std::move(f));
  }

  // Every key of t must be in `known`; `where` names the table in messages ("[[prizes]]").
  void keys(const toml::table& t, const std::string& path, const std::vector<std::string>& known,
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

  // A missing key is reported at its table's header; a missing top-level key has no line (0).
  void missing(const toml::node& parent, const std::string& path, const std::string& what) {
    add("missing_field", path, "'" + path + "' is required: " + what,
        path.find_first_of(".[") == std::string::npos ? toml::source_region{} : parent.source());
  }

  std::optional<std::string> str(const toml::table& t, const char* key, const std::string& path, bool required,
                                 const std::string& what = "") {
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

  // Text fields end up in terminals, tables and logs: a C0 control character (an ANSI escape, a
  // newline, a tab) or DEL there could repaint a screen or forge a line, so it is refused.
  bool no_control_chars(const std::string& v, const std::string& path, const toml::source_region& where) {
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

  std::optional<bool> boolean(const toml::table& t, const char* key, const std::string& path) {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (!n->is_boolean()) {
      add("wrong_type", path, "'" + path + "' must be true or false, not " + type_desc(*n), n->source());
      return std::nullopt;
    }
    return n->value_or(false);
  }

  std::optional<int64_t> integer(const toml::table& t, const char* key, const std::string& path, bool required,
                                 Num kind, const std::string& what = "") {
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

  // A ratio of the budget ([budget] warn_at ...): a number above 0 and at most 1, kept in millionths.
  // An integer is accepted (stop_at = 1); nan, inf and anything out of range are refused here.
  std::optional<int64_t> ratio(const toml::table& t, const char* key, const std::string& path) {
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

  // A code field: [a-z0-9_-]{1,64}.
  std::string code(const toml::table& t, const char* key, const std::string& path, const std::string& what) {
    auto s = str(t, key, path, true, "add the " + what + " code, e.g. \"spring_2025\" (a-z 0-9 _ -)");
    if (!s) return "";
    if (!valid_code(*s)) bad_code(path, *s, what, t.get(key)->source());
    return *s;
  }

  void bad_code(const std::string& path, const std::string& s, const std::string& what, const toml::source_region& r) {
    std::string fix = sanitized_code(s);
    add("bad_code", path,
        what + " code '" + s + "' may hold only a-z, 0-9, _ and - (1 to 64 characters)" +
            (fix.empty() || fix == s ? std::string(": choose another") : ": for example '" + fix + "'"),
        r);
  }

  const toml::table* table(const toml::table& t, const char* key, const std::string& path, const std::string& how) {
    const toml::node* n = t.get(key);
    if (!n) return nullptr;
    if (!n->is_table()) {
      add("wrong_type", path, "'" + path + "' must be a table (" + how + "), not " + type_desc(*n), n->source());
      return nullptr;
    }
    return n->as_table();
  }

  // An array of tables ([[prizes]]); each element is passed to fn(table, path).
  template <class Fn>
  bool each_table(const toml::table& t, const char* key, const std::string& path, const std::string& how, Fn fn) {
    const toml::node* n = t.get(key);
    if (!n) return false;
    const toml::array* a = n->as_array();
    if (!a) {
      add("wrong_type", path, "'" + path + "' must be an array of tables (" + how + "), not " + type_desc(*n),
          n->source());
      return true;
    }
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& el = *a->get(i);
      if (!el.is_table()) {
        add("wrong_type", index(path, i), "'" + index(path, i) + "' must be a table (" + how + "), not " + type_desc(el),
            el.source());
        continue;
      }
      fn(*el.as_table(), index(path, i));
    }
    return true;
  }

  std::optional<LimitSpec> limit(const toml::table& parent, const std::string& path) {
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

  std::vector<std::string> users(const toml::table& parent, const char* key) {
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
                                             " bytes of UTF-8 without control characters",
            el.source());
        continue;
      }
      out.push_back(id);
    }
    return out;
  }

  // start/end: a TOML offset date-time or an RFC 3339 string with an offset. A time without an offset
  // is ambiguous (whose midnight?), so it is refused with the offset the activity's zone would give.
  std::optional<Millis> time(const toml::table& t, const char* key, const std::string& zone) {
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

  static std::string no_offset_message(const std::string& path, const std::string& local, const std::string& zone) {
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
};

void parse_item(Parser& p, const std::string& key, const toml::node& node, Definition& d) {
  std::string path = "items." + key;
  if (!valid_code(key)) p.bad_code(path, key, "item", node.source());
  const toml::table* t = node.as_table();
  if (!t) {
    p.add("wrong_type", path,
          "'" + path + "' must be a table ([" + path + "] with kind, unit_cost_cents, channel), not " + type_desc(node),
          node.source());
    return;
  }
  p.keys(*t, path, kItemKeys, "[" + path + "]");
  ItemDef it;
  it.code = key;
  it.path = path;
  if (auto k = p.str(*t, "kind", join(path, "kind"), true, "add kind = cash|coupon|points|virtual|physical")) {
    if (std::find(kItemKinds.begin(), kItemKinds.end(), *k) == kItemKinds.end()) {
      std::string guess = did_you_mean(*k, kItemKinds);
      p.add("bad_value", join(path, "kind"),
            "'" + join(path, "kind") + "' is '" + *k + "': use cash, coupon, points, virtual or physical" +
                (guess.empty() ? "" : " (did you mean '" + guess + "'?)"),
            t->get("kind")->source());
    }
    it.kind = *k;
  }
  it.unit_cost_cents = p.integer(*t, "unit_cost_cents", join(path, "unit_cost_cents"), true, Num::amount,
                                 "what one unit costs in cents (1 for cash: amounts are then cents)")
                           .value_or(0);
  it.channel = p.str(*t, "channel", join(path, "channel"), true, "name the delivery channel, e.g. channel = \"ledger\"")
                   .value_or("");
  it.max_amount = p.integer(*t, "max_amount", join(path, "max_amount"), false, Num::positive);
  d.items.push_back(std::move(it));
}

void parse_prize(Parser& p, const toml::table& t, const std::string& path, Definition& d) {
  p.keys(t, path, kPrizeKeys, "[[prizes]]");
  PrizeDef z;
  z.path = path;
  z.code = p.code(t, "code", join(path, "code"), "prize");
  z.item = p.str(t, "item", join(path, "item"), true, "name the item (a key under [items]) this prize delivers")
               .value_or("");
  bool has_amount = t.get("amount"), has_min = t.get("amount_min"), has_max = t.get("amount_max");
  if (has_amount && (has_min || has_max)) {
    p.add("conflicting_fields", join(path, has_min ? "amount_min" : "amount_max"),
          "'" + path + "' has both amount and " + (has_min ? "amount_min" : "amount_max") +
              ": use amount for a fixed amount, or amount_min and amount_max for a random range",
          t.get(has_min ? "amount_min" : "amount_max")->source());
  } else if (has_min || has_max) {
    auto lo = p.integer(t, "amount_min", join(path, "amount_min"), true, Num::amount,
                        "a random range needs both amount_min and amount_max");
    auto hi = p.integer(t, "amount_max", join(path, "amount_max"), true, Num::amount,
                        "a random range needs both amount_min and amount_max");
    z.amount = lo.value_or(0);
    z.amount_max = hi;
  } else {
    z.amount = p.integer(t, "amount", join(path, "amount"), true, Num::amount,
                         "add amount (cents for a cash item, units otherwise), or amount_min and amount_max")
                   .value_or(0);
  }
  z.stock = p.integer(t, "stock", join(path, "stock"), true, Num::amount, "how many of this prize may be granted in all")
                .value_or(0);
  z.stock_buckets = p.integer(t, "stock_buckets", join(path, "stock_buckets"), false, Num::positive).value_or(1);
  z.weight = p.integer(t, "weight", join(path, "weight"), false, Num::weight).value_or(0);
  z.validity_days = p.integer(t, "validity_days", join(path, "validity_days"), false, Num::positive);
  z.limit = p.limit(t, join(path, "limit"));
  z.high_value = p.boolean(t, "high_value", join(path, "high_value")).value_or(false);
  d.prizes.push_back(std::move(z));
}

void parse_fuse(Parser& p, const toml::table& t, const std::string& path, Definition& d) {
  p.keys(t, path, kFuseKeys, "[[fuse]]");
  FuseDef f;
  f.path = path;
  f.name = p.str(t, "name", join(path, "name"), true, "name the rule, e.g. name = \"big_prize_rate\"").value_or("");
  f.prize = p.str(t, "prize", join(path, "prize"), false);
  f.window_seconds = p.integer(t, "window_seconds", join(path, "window_seconds"), true, Num::positive,
                               "the length of the counting window in seconds")
                         .value_or(0);
  f.max_count = p.integer(t, "max_count", join(path, "max_count"), false, Num::positive);
  f.max_amount_cents = p.integer(t, "max_amount_cents", join(path, "max_amount_cents"), false, Num::positive);
  f.pop_percent = p.integer(t, "pop_percent", join(path, "pop_percent"), false, Num::positive);
  f.dod_percent = p.integer(t, "dod_percent", join(path, "dod_percent"), false, Num::positive);
  f.min_count = p.integer(t, "min_count", join(path, "min_count"), false, Num::amount).value_or(0);
  d.fuses.push_back(std::move(f));
}

// Finds the node a field path names ("prizes[1].limit.count"), or the nearest existing ancestor.
const toml::node* locate(const toml::table& root, const std::string& path) {
  const toml::node* cur = &root;
  size_t i = 0;
  while (i < path.size() && cur) {
    const toml::node* next = nullptr;
    if (path[i] == '[') {
      size_t close = path.find(']', i);
      if (close == std::string::npos) break;
      size_t n = std::strtoull(path.c_str() + i + 1, nullptr, 10);
      if (auto* a = cur->as_array()) next = a->get(n);
      i = close + 1;
    } else {
      if (path[i] == '.') ++i;
      size_t end = path.find_first_of(".[", i);
      if (end == std::string::npos) end = path.size();
      if (auto* t = cur->as_table()) next = t->get(path.substr(i, end - i));
      i = end;
    }
    if (!next) break;
    cur = next;
  }
  return cur;
}

}  // namespace

Parsed parse_definition(const std::string& text, const std::string& source) {
  Parsed r;
  toml::table root;
  try {
    root = toml::parse(std::string_view(text), std::string_view(source));
  } catch (const toml::parse_error& e) {
    Finding f;
    f.code = "syntax";
    f.path = "";
    f.line = int(e.source().begin.line);
    f.column = int(e.source().begin.column);
    f.message = one_line("malformed TOML: " + std::string(e.description()) + " (fix the file at line " +
                         std::to_string(f.line) + ", column " + std::to_string(f.column) + ")");
    r.findings.push_back(std::move(f));
    return r;
  }

  Parser p;
  Definition d;
  p.keys(root, "", kTopKeys, "the top level");
  d.code = p.code(root, "code", "code", "activity");
  if (auto n = p.str(root, "name", "name", true, "add a human-readable name")) {
    if (n->find_first_not_of(" \t") == std::string::npos)
      p.add("bad_value", "name", "'name' is empty: write a human-readable name", root.get("name")->source());
    d.name = *n;
  }
  if (auto k = p.str(root, "kind", "kind", true, "add kind = \"direct\", \"lottery\" or \"redpack\"")) {
    if (auto kk = parse_kind(*k)) d.kind = *kk;
    else {
      std::string guess = did_you_mean(*k, {"direct", "lottery", "redpack"});
      p.add("bad_value", "kind",
            "'kind' is '" + *k + "': use direct, lottery or redpack" + (guess.empty() ? "" : " (did you mean '" + guess + "'?)"),
            root.get("kind")->source());
    }
  }
  if (auto z = p.str(root, "timezone", "timezone", true, "add an IANA zone such as \"Asia/Shanghai\"")) {
    d.timezone = *z;
    if (!zone_exists(*z))
      p.add("unknown_timezone", "timezone",
            "'timezone' is '" + *z + "', which is not an IANA time zone: use one such as Asia/Shanghai or UTC",
            root.get("timezone")->source());
  }
  auto start = p.time(root, "start", d.timezone);
  auto end = p.time(root, "end", d.timezone);
  if (start) d.start_at = *start;
  if (end) d.end_at = *end;
  if (start && end && *end <= *start)
    p.add("window_order", "end",
          "'end' (" + format_utc(*end) + ") is not after 'start' (" + format_utc(*start) +
              "): the window must end after it starts",
          root.get("end")->source());
  d.whitelist_required = p.boolean(root, "whitelist_required", "whitelist_required").value_or(false);
  d.budget_cents = p.integer(root, "budget_cents", "budget_cents", false, Num::amount);
  if (const toml::table* b = p.table(root, "budget", "budget", "[budget] with warn_at, degrade_at, stop_at")) {
    p.keys(*b, "budget", kBudgetKeys, "[budget]");
    d.ladder.warn_ppm = p.ratio(*b, "warn_at", "budget.warn_at");
    d.ladder.degrade_ppm = p.ratio(*b, "degrade_at", "budget.degrade_at");
    d.ladder.stop_ppm = p.ratio(*b, "stop_at", "budget.stop_at");
  }
  d.limit = p.limit(root, "limit");
  d.gray_users = p.users(root, "gray");
  d.blacklist = p.users(root, "blacklist");

  if (const toml::node* items = root.get("items")) {
    if (const toml::table* t = items->as_table()) {
      for (auto&& [k, v] : *t) parse_item(p, std::string(k.str()), v, d);
    } else {
      p.add("wrong_type", "items", "'items' must be tables keyed by item code ([items.CODE]), not " + std::string(type_desc(*items)),
            items->source());
    }
  } else {
    p.missing(root, "items", "define at least one [items.CODE] table (kind, unit_cost_cents, channel)");
  }

  if (!p.each_table(root, "prizes", "prizes", "[[prizes]]",
                    [&](const toml::table& t, const std::string& path) { parse_prize(p, t, path, d); }))
    p.missing(root, "prizes", "define at least one [[prizes]] table (code, item, amount, stock)");

  if (const toml::table* lot = p.table(root, "lottery", "lottery", "[lottery] with consolation and guarantees")) {
    p.keys(*lot, "lottery", kLotteryKeys, "[lottery]");
    d.consolation = p.str(*lot, "consolation", "lottery.consolation", false);
    p.each_table(*lot, "guarantees", "lottery.guarantees", "[[lottery.guarantees]] with nth and prize",
                 [&](const toml::table& t, const std::string& path) {
                   p.keys(t, path, kGuaranteeKeys, "[[lottery.guarantees]]");
                   Guarantee g;
                   g.nth = p.integer(t, "nth", join(path, "nth"), true, Num::any, "the draw number (1-based) it applies to")
                               .value_or(0);
                   g.prize = p.str(t, "prize", join(path, "prize"), true, "name the prize that draw yields").value_or("");
                   d.guarantees.push_back(std::move(g));
                 });
  }

  p.each_table(root, "fuse", "fuse", "[[fuse]]",
               [&](const toml::table& t, const std::string& path) { parse_fuse(p, t, path, d); });

  r.findings = std::move(p.findings);
  if (!has_errors(r.findings)) r.def = std::move(d);
  return r;
}

Parsed review_definition(const std::string& text, const std::string& source, const LintContext& ctx) {
  Parsed r = parse_definition(text, source);
  if (!r.def) return r;
  auto more = lint(*r.def, ctx);
  // lint works on the Definition, which does not keep positions: find them again in the document.
  toml::table root = toml::parse(std::string_view(text), std::string_view(source));
  for (auto& f : more) {
    if (f.line == 0 && !f.path.empty()) {
      const toml::node* n = locate(root, f.path);
      if (n && n != &root) {
        f.line = int(n->source().begin.line);
        f.column = int(n->source().begin.column);
      }
    }
    r.findings.push_back(std::move(f));
  }
  if (has_errors(r.findings)) r.def.reset();
  return r;
}

}  // namespace rc::activity
