#pragma once
// Activities for tests: definitions built from a few knobs, stored live through the real CLI
// (`activity create --publish` with review.required = false, as CI seeds activities).
#include <memory>
#include <optional>
#include <string>

#include "core/clock.hpp"
#include "core/engine/engine.hpp"
#include "support/harness.hpp"

namespace rt {

struct Spec {
  std::string code = "act";
  std::string kind = "direct";
  std::string timezone = "Asia/Shanghai";
  std::string start = "2020-01-01T00:00:00+08:00";
  std::string end = "2099-01-01T00:00:00+08:00";
  int64_t stock = 100;
  int64_t buckets = 1;
  std::optional<int64_t> limit;           // per-user limit count
  std::string period = "total";
  std::optional<int64_t> budget;          // cents
  std::string item_kind = "coupon";
  int64_t unit_cost = 100;
  int64_t amount = 1;
  std::string channel = "ledger";
  bool whitelist = false;
  std::string gray;                       // TOML array body, e.g. "\"u1\", \"u2\""
  std::string black;
  std::string extra;                      // appended verbatim (more [[prizes]], [lottery], ...)
  bool custom_prizes = false;             // true: `extra` holds the [[prizes]] (no default prize)
};

// A red packet activity: one prize "pack" of a cash item at 1 cent a unit, a random amount in
// [amount_min, amount_max], 100 in stock, and the budget given.
Spec redpack(int64_t budget, int64_t amount_min = 100, int64_t amount_max = 300);

std::string definition(const Spec& s);
// Creates and publishes (live) the activity; fails the test when the CLI refuses.
void seed(const TestDb& db, const Spec& s, const std::map<std::string, std::string>& env = {});

// An in-process engine on its own connection, with a fixed or system clock.
struct EngineBox {
  std::unique_ptr<rc::store::Store> store;
  std::unique_ptr<rc::Clock> clock;
  std::unique_ptr<rc::engine::Engine> engine;
};
EngineBox engine(const TestDb& db, std::optional<rc::Millis> fixed_now = std::nullopt,
                 rc::engine::EngineOptions opts = {});

rc::engine::ClaimOutcome claim(rc::engine::Engine& e, const std::string& activity, const std::string& user,
                               const std::string& biz);

}  // namespace rt
