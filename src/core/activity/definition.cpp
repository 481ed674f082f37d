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

#include "core/activity/definition_reader.hpp"
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

using namespace reader;


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
