#include "core/budget_ladder.hpp"

#include <cstdio>

#include "core/alert_outbox.hpp"
#include "core/audit.hpp"

namespace rc {

namespace {
constexpr int64_t kPpm = 1'000'000;

std::optional<int64_t> ratio_of(const LadderRatios& r, LadderStep s) {
  switch (s) {
    case LadderStep::warn: return r.warn;
    case LadderStep::degrade: return r.degrade;
    case LadderStep::stop: return r.stop;
    case LadderStep::normal: break;
  }
  return std::nullopt;
}

const char* key_of(LadderStep s) {
  switch (s) {
    case LadderStep::warn: return "warn_at";
    case LadderStep::degrade: return "degrade_at";
    case LadderStep::stop: return "stop_at";
    case LadderStep::normal: break;
  }
  return "";
}
}  // namespace

const char* ladder_step_name(LadderStep s) {
  switch (s) {
    case LadderStep::normal: return "normal";
    case LadderStep::warn: return "warn";
    case LadderStep::degrade: return "degrade";
    case LadderStep::stop: return "stop";
  }
  return "normal";
}

LadderStep parse_ladder_step(const std::string& s) {
  if (s == "warn") return LadderStep::warn;
  if (s == "degrade") return LadderStep::degrade;
  if (s == "stop") return LadderStep::stop;
  return LadderStep::normal;
}

int64_t threshold_cents(int64_t authorised, int64_t ppm) {
  const __int128 num = __int128(authorised) * ppm;
  return int64_t((num + kPpm - 1) / kPpm);  // <= authorised, since ppm <= 1e6
}

LadderCents thresholds(int64_t authorised, const LadderRatios& r) {
  LadderCents c;
  if (r.warn) c.warn = threshold_cents(authorised, *r.warn);
  if (r.degrade) c.degrade = threshold_cents(authorised, *r.degrade);
  if (r.stop) c.stop = threshold_cents(authorised, *r.stop);
  return c;
}

LadderStep step_for(int64_t consumed, const LadderCents& c) {
  if (c.stop && consumed >= *c.stop) return LadderStep::stop;
  if (c.degrade && consumed >= *c.degrade) return LadderStep::degrade;
  if (c.warn && consumed >= *c.warn) return LadderStep::warn;
  return LadderStep::normal;
}

std::string ratio_text(int64_t ppm) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(ppm) / double(kPpm));
  return buf;
}

std::string describe(const LadderMove& m) {
  char pct[48] = "no budget authorised";
  if (m.authorised_cents > 0) {
    const __int128 bp = __int128(m.consumed_cents) * 10000 / m.authorised_cents;
    std::snprintf(pct, sizeof pct, "%lld.%02lld%%", static_cast<long long>(bp / 100), static_cast<long long>(bp % 100));
  }
  std::string s = "budget ladder of " + (m.activity.empty() ? "#" + std::to_string(m.activity_id) : m.activity) +
                  ": " + ladder_step_name(m.from) + " -> " + ladder_step_name(m.to) + " (consumed " +
                  std::to_string(m.consumed_cents) + " of " + std::to_string(m.authorised_cents) + " cents, " + pct;
  // going up names the threshold reached; going down the one the ratio is back under
  const LadderStep named = m.up() ? m.to : m.from;
  if (auto r = ratio_of(m.ratios, named)) s += std::string(m.up() ? "; " : "; back under ") + key_of(named) + " " + ratio_text(*r);
  return s + ")";
}

nlohmann::json ladder_alert_body(const LadderMove& m) {
  auto ratio = [](std::optional<int64_t> ppm) {
    return ppm ? nlohmann::json(double(*ppm) / double(kPpm)) : nlohmann::json(nullptr);
  };
  return {{"activity", m.activity},
          {"from", ladder_step_name(m.from)},
          {"to", ladder_step_name(m.to)},
          {"consumed_cents", m.consumed_cents},
          {"authorised_cents", m.authorised_cents},
          {"warn_at", ratio(m.ratios.warn)},
          {"degrade_at", ratio(m.ratios.degrade)},
          {"stop_at", ratio(m.ratios.stop)},
          {"at", format_utc(m.at)},
          {"message", describe(m)}};
}

bool move_step(store::Session& s, LadderMove& m, const std::string& actor, const std::string& why) {
  if (s.exec("UPDATE budget SET ladder_step = $2 WHERE activity_id = $1 AND ladder_step = $3",
             {m.activity_id, std::string(ladder_step_name(m.to)), std::string(ladder_step_name(m.from))}) != 1)
    return false;
  log_status(s, {"budget", m.activity_id, std::string(ladder_step_name(m.from)), ladder_step_name(m.to), actor,
                 why.substr(0, 500), std::nullopt},
             m.at);
  if (m.up()) m.alert_id = queue_alert(s, "budget_ladder", m.activity_id, ladder_alert_body(m), m.at);
  return true;
}

std::optional<LadderMove> settle_ladder(store::Session& s, int64_t activity_id, const std::string& code,
                                        const std::string& actor, const std::string& why, Millis now) {
  const std::string lock = s.lock_rows(store::Lock::update);
  auto r = s.query("SELECT authorised_cents, consumed_cents, warn_ppm, degrade_ppm, stop_ppm, ladder_step FROM budget "
                   "WHERE activity_id = $1" + lock,
                   {activity_id});
  if (r.empty()) return std::nullopt;
  LadderMove m;
  m.activity_id = activity_id;
  m.activity = code;
  m.authorised_cents = r[0].i64(0);
  m.consumed_cents = r[0].i64(1);
  m.ratios = {r[0].opt_i64(2), r[0].opt_i64(3), r[0].opt_i64(4)};
  m.from = parse_ladder_step(r[0].str_or(5, "normal"));
  m.at = now;
  // no early return without ratios: a version that drops its ladder must clear the thresholds too
  const LadderCents c = thresholds(m.authorised_cents, m.ratios);
  s.exec("UPDATE budget SET warn_cents = $2, degrade_cents = $3, stop_cents = $4 WHERE activity_id = $1",
         {activity_id, store::opt(c.warn), store::opt(c.degrade), store::opt(c.stop)});
  m.to = step_for(m.consumed_cents, c);
  if (m.to == m.from) return std::nullopt;
  if (!move_step(s, m, actor, why + ": " + describe(m))) return std::nullopt;
  return m;
}

}  // namespace rc
