#pragma once
// An activity definition: the TOML file an operator writes (templates/ shows every field), parsed
// into a Definition, then reviewed by lint() before anything is stored. Money is int64 cents;
// amounts are integer units of the prize's item (cents for cash items).
//
// File format (all keys; anything else is an `unknown_key` error):
//   code = "zsff_2025_anniversary"          # required, [a-z0-9_-]{1,64}
//   name = "..."                             # required, non-empty
//   kind = "direct" | "lottery" | "redpack"  # required
//   timezone = "Asia/Shanghai"               # required, IANA
//   start = 2025-11-01T00:00:00+08:00        # required; TOML offset date-time or an RFC 3339 string,
//   end   = "2025-11-30T23:59:59+08:00"      #   with an offset (a local time is an error); the end
//                                            #   second is inclusive (core/activity/window.hpp)
//   whitelist_required = false               # optional, default false: only qualified users may claim
//   budget_cents = 500000                    # optional (required for cash items / redpack)
//   [budget]           warn_at = 0.8, degrade_at = 0.9, stop_at = 1.0   # optional budget ladder: ratios
//                      of consumed / authorised, each above 0 and at most 1, warn <= degrade <= stop
//   [limit]            count = 1, period = "total"|"day"|"week"|"month"   # optional per-user limit
//   [gray]             users = ["u1", ...]   # gray whitelist (who may claim while state is gray)
//   [blacklist]        users = ["u9", ...]
//   [items.CODE]       kind = "cash"|"coupon"|"points"|"virtual"|"physical", unit_cost_cents = 1000,
//                      channel = "ledger", max_amount = 100 (optional cap on a prize's amount)
//   [[prizes]]         code, item, amount (fixed) | amount_min + amount_max (redpack random range),
//                      stock, stock_buckets = 1, weight (lottery), validity_days (optional),
//                      high_value = false (switched off from the ladder's degrade step on),
//                      [prizes.limit] count, period   (optional per-user, per-prize limit)
//   [lottery]          consolation = "PRIZE_CODE", [[lottery.guarantees]] nth = 10, prize = "CODE"
//   [[fuse]]           name, prize (optional: whole activity when absent), window_seconds,
//                      max_count, max_amount_cents, pop_percent, dod_percent, min_count
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/states.hpp"

namespace rc::activity {

// What the engine and the schema can hold. lint() refuses a definition beyond them
// (buckets_over_max, value_too_large), so that whatever `create` accepts, every claim can process.
constexpr int64_t kMaxStockBuckets = 1024;   // stock rows per prize
constexpr int64_t kMaxValidityDays = 36500;  // 100 years: expiry dates stay printable (year <= 9999)
constexpr int64_t kMaxInt32 = 2147483647;    // INTEGER columns (PostgreSQL int4): fuse window and percents

// Kind (direct, lottery, redpack) and its name table are in core/states.hpp.
const char* kind_name(Kind k);
std::optional<Kind> parse_kind(const std::string& s);

struct LimitSpec {
  int64_t count = 0;
  Period period = Period::total;
};

struct ItemDef {
  std::string code;
  std::string kind;  // cash coupon points virtual physical
  int64_t unit_cost_cents = 0;
  std::string channel;
  std::optional<int64_t> max_amount;
  std::string path;  // "items.coupon_10": field path for findings
};

struct PrizeDef {
  std::string code;
  std::string item;
  int64_t amount = 0;                 // fixed amount; for a random redpack: the minimum
  std::optional<int64_t> amount_max;  // random redpack: amount is drawn in [amount, amount_max]
  int64_t stock = 0;
  int64_t stock_buckets = 1;
  std::optional<LimitSpec> limit;
  int64_t weight = 0;
  std::optional<int64_t> validity_days;
  bool high_value = false;  // the budget ladder's degrade step switches it off
  std::string path;  // "prizes[0]"
};

struct Guarantee {
  int64_t nth = 0;  // the nth draw of a user (1-based) yields `prize`
  std::string prize;
};

struct FuseDef {
  std::string name;
  std::optional<std::string> prize;  // empty: the whole activity
  int64_t window_seconds = 0;
  std::optional<int64_t> max_count, max_amount_cents, pop_percent, dod_percent;
  int64_t min_count = 0;  // period comparisons apply only above this many grants in the window
  std::string path;
};

// The budget ladder (docs/design.md §4.4: normal -> warn -> degrade -> stop), as ratios of consumed over
// authorised in millionths (0.8 is 800000); each step is optional. See engine/budget_ladder.hpp.
constexpr int64_t kPpm = 1'000'000;
struct LadderDef {
  std::optional<int64_t> warn_ppm, degrade_ppm, stop_ppm;
  bool any() const { return warn_ppm || degrade_ppm || stop_ppm; }
};

struct Definition {
  std::string code, name;
  Kind kind = Kind::direct;
  std::string timezone;
  Millis start_at = 0, end_at = 0;
  bool whitelist_required = false;
  std::optional<int64_t> budget_cents;
  LadderDef ladder;  // [budget]
  std::optional<LimitSpec> limit;
  std::vector<std::string> gray_users, blacklist;
  std::vector<ItemDef> items;
  std::vector<PrizeDef> prizes;
  std::optional<std::string> consolation;  // lottery
  std::vector<Guarantee> guarantees;       // lottery
  std::vector<FuseDef> fuses;

  const ItemDef* item(const std::string& code) const;
  const PrizeDef* prize(const std::string& code) const;
  // Cost in cents of one grant of the prize at its (maximum) amount: amount × unit cost.
  int64_t max_cost_cents(const PrizeDef& p) const;
};

// What a lottery draw costs on average (docs/design.md §4.5), in integer arithmetic: sum(weight x cost) /
// sum(weight), rounded to the nearest cent, and how many draws the budget covers (none without a
// budget or when draws cost nothing). Empty when no prize has a weight. Used by lint and by drill.
struct DrawCost {
  int64_t per_draw_cents = 0;
  std::optional<int64_t> draws_covered;
};

std::optional<DrawCost> expected_draw_cost(const Definition& d);

enum class Severity { error, warning, info };
const char* severity_name(Severity s);

struct Finding {
  std::string code;      // stable, for scripts: unknown_key, wrong_type, missing_field, bad_code, ...
  Severity severity = Severity::error;
  std::string path;      // field path: "prizes[1].weight", "items.coupon_10.channel", "" for the file
  std::string message;   // one line, says what to do
  int line = 0, column = 0;  // in the file, when known (0 = unknown)
};

struct Parsed {
  std::optional<Definition> def;  // empty when any error finding stopped parsing
  std::vector<Finding> findings;  // syntax, unknown keys, types, required fields, formats
};

// Parses a definition. `source` names the file in findings. Never throws for bad input: a malformed
// file gives a `syntax` finding with line and column.
Parsed parse_definition(const std::string& text, const std::string& source);

struct LintContext {
  std::set<std::string> channels;  // configured channel names (ledger and outbox always exist)
};

// The automated technical review of a parsed definition: semantic findings (see lint.cpp for the
// list of codes). Info findings carry figures such as the lottery's expected cost per draw.
std::vector<Finding> lint(const Definition& d, const LintContext& ctx);

// Parse + lint in one call; def is empty when any finding is an error.
Parsed review_definition(const std::string& text, const std::string& source, const LintContext& ctx);

bool has_errors(const std::vector<Finding>& f);
bool valid_code(const std::string& code);  // [a-z0-9_-]{1,64}

}  // namespace rc::activity
