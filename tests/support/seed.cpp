#include "support/seed.hpp"

#include <doctest/doctest.h>

namespace rt {

Spec redpack(int64_t budget, int64_t amount_min, int64_t amount_max) {
  Spec s;
  s.kind = "redpack";
  s.item_kind = "cash";
  s.unit_cost = 1;
  s.budget = budget;
  s.custom_prizes = true;
  s.extra = "[[prizes]]\ncode = \"pack\"\nitem = \"thing\"\namount_min = " + std::to_string(amount_min) +
            "\namount_max = " + std::to_string(amount_max) + "\nstock = 100\n";
  return s;
}

std::string definition(const Spec& s) {
  std::string t;
  t += "code = \"" + s.code + "\"\nname = \"test " + s.code + "\"\nkind = \"" + s.kind + "\"\n";
  t += "timezone = \"" + s.timezone + "\"\nstart = \"" + s.start + "\"\nend = \"" + s.end + "\"\n";
  if (s.whitelist) t += "whitelist_required = true\n";
  if (s.budget) t += "budget_cents = " + std::to_string(*s.budget) + "\n";
  if (s.limit) t += "[limit]\ncount = " + std::to_string(*s.limit) + "\nperiod = \"" + s.period + "\"\n";
  if (!s.gray.empty()) t += "[gray]\nusers = [" + s.gray + "]\n";
  if (!s.black.empty()) t += "[blacklist]\nusers = [" + s.black + "]\n";
  t += "[items.thing]\nkind = \"" + s.item_kind + "\"\nunit_cost_cents = " + std::to_string(s.unit_cost) +
       "\nchannel = \"" + s.channel + "\"\n";
  if (!s.custom_prizes) {
    t += "[[prizes]]\ncode = \"p1\"\nitem = \"thing\"\namount = " + std::to_string(s.amount) +
         "\nstock = " + std::to_string(s.stock) + "\nstock_buckets = " + std::to_string(s.buckets) + "\n";
  }
  t += s.extra;
  return t;
}

void seed(const TestDb& db, const Spec& s, const std::map<std::string, std::string>& env) {
  std::string f = write_file(db.dir(), s.code + ".toml", definition(s));
  auto e = env;
  e["REWARDCTL_REVIEW_REQUIRED"] = "false";
  auto r = db.rc({"activity", "create", "-f", f, "--publish", "--operator", "seeder"}, e);
  INFO("seed " << s.code << ":\n" << definition(s) << "\n" << r.err);
  REQUIRE(r.rc == 0);
}

EngineBox engine(const TestDb& db, std::optional<rc::Millis> fixed_now, rc::engine::EngineOptions opts) {
  EngineBox b;
  b.store = db.open();
  if (fixed_now) b.clock = std::make_unique<rc::FixedClock>(*fixed_now);
  else b.clock = std::make_unique<rc::SystemClock>();
  if (opts.actor.empty()) opts.actor = "test";
  b.engine = std::make_unique<rc::engine::Engine>(*b.store, *b.clock, std::move(opts));
  return b;
}

rc::engine::ClaimOutcome claim(rc::engine::Engine& e, const std::string& activity, const std::string& user,
                               const std::string& biz) {
  rc::engine::ClaimRequest r;
  r.activity = activity;
  r.user = user;
  r.biz_id = biz;
  return e.claim(r);
}

}  // namespace rt
