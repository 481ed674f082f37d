#include "cli/formats.hpp"

#include <cmath>

namespace rc::cli {

using nlohmann::json;

json activity_summary_json(const activity::ActivitySummary& s) {
  const auto& a = s.activity;
  json out{{"code", a.code},
           {"name", a.name},
           {"kind", a.kind},
           {"state", a.state},
           {"version", a.version},
           {"definition_hash", a.definition_hash},
           {"timezone", a.timezone},
           {"start", format_in_zone(a.start_at, a.timezone)},
           {"end", format_in_zone(a.end_at, a.timezone)},
           {"start_utc", format_utc(a.start_at)},
           {"end_utc", format_utc(a.end_at)},
           {"whitelist_required", a.whitelist_required},
           {"user_limit", a.user_limit ? json(std::to_string(*a.user_limit) + "/" + a.user_limit_period.value_or(""))
                                       : json(nullptr)},
           {"created_by", a.created_by},
           {"created_at", format_utc(a.created_at)}};
  if (s.budget) {
    out["budget_cents"] = s.budget->authorised_cents;
    out["budget_used_cents"] = s.budget->consumed_cents;
    out["budget_left_cents"] = s.budget->authorised_cents - s.budget->consumed_cents;
    const auto& b = *s.budget;
    if (b.warn_ppm || b.degrade_ppm || b.stop_ppm || b.ladder_step != "normal") {
      // the budget ladder: the step last logged, the ratio now, and the configured thresholds
      auto ratio = [](std::optional<int64_t> ppm) { return ppm ? json(double(*ppm) / 1e6) : json(nullptr); };
      out["budget_step"] = b.ladder_step;
      out["budget_ratio"] = b.authorised_cents > 0
                                ? json(std::floor(double(b.consumed_cents) / double(b.authorised_cents) * 10000) / 10000)
                                : json(nullptr);
      out["budget_warn_at"] = ratio(b.warn_ppm);
      out["budget_degrade_at"] = ratio(b.degrade_ppm);
      out["budget_stop_at"] = ratio(b.stop_ppm);
    }
  }
  json prizes = json::array();
  for (auto& p : s.prizes)
    prizes.push_back({{"prize", p.prize},
                      {"item", p.item},
                      {"item_kind", p.item_kind},
                      {"amount", p.amount_max ? json(std::to_string(p.amount) + ".." + std::to_string(*p.amount_max))
                                              : json(p.amount)},
                      {"stock", p.stock},
                      {"stock_left", p.stock_left},
                      {"buckets", p.buckets},
                      {"weight", p.weight},
                      {"consolation", p.consolation},
                      {"blocked", p.blocked},
                      {"retired", p.retired},
                      {"high_value", p.high_value},
                      {"channel", p.channel}});
  out["prizes"] = prizes;
  json reviews = json::array();
  for (auto& r : s.reviews)
    reviews.push_back({{"role", r.role},
                       {"decision", r.decision},
                       {"operator", r.operator_name},
                       {"definition_hash", r.definition_hash},
                       {"voided", r.voided},
                       {"version", r.version ? json(*r.version) : json(nullptr)},
                       {"comment", r.comment.value_or("")},
                       {"at", format_utc(r.at)}});
  out["reviews"] = reviews;
  out["grants"] = s.grants;
  out["granted_cost_cents"] = s.granted_cost_cents;
  return out;
}

json activity_list_json(const activity::ActivityListRow& a) {
  return {{"code", a.code},
          {"name", a.name},
          {"kind", a.kind},
          {"state", a.state},
          {"timezone", a.timezone},
          {"start", format_in_zone(a.start_at, a.timezone)},
          {"end", format_in_zone(a.end_at, a.timezone)},
          {"version", a.version}};
}

json history_json(const activity::HistoryEvent& e) {
  json j{{"at", format_utc(e.at)},
         {"source", e.from_status_log ? "status_log" : "audit"},
         {"actor", e.actor},
         {"what", e.what},
         {"detail", e.detail}};
  if (e.from_status_log) {
    j["from"] = e.from ? json(*e.from) : json(nullptr);
    j["to"] = e.to;
  }
  return j;
}

json version_json(const activity::VersionEntry& v) {
  auto opt = [](const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); };
  return {{"version", v.version},
          {"state", v.state},
          {"hash", v.definition_hash},
          {"proposed_by", v.proposed_by},
          {"at", format_utc(v.created_at)},
          {"product_by", opt(v.product_by)},
          {"tech_by", opt(v.tech_by)},
          {"decided_by", opt(v.decided_by)},
          {"switched_at", v.switched_at ? json(format_utc(*v.switched_at)) : json(nullptr)},
          {"reason", opt(v.reason)}};
}

json ledger_balance_json(const std::string& user, const engine::LedgerBalance& b) {
  return {{"user", user}, {"asset", b.asset}, {"balance", b.balance}, {"updated_at", format_utc(b.updated_at)}};
}

json ledger_entry_json(const std::string& user, const engine::LedgerEntry& e) {
  return {{"user", user},      {"bill_no", e.bill_no}, {"kind", e.kind},
          {"asset", e.asset}, {"amount", e.amount},   {"at", format_utc(e.created_at)}};
}

}  // namespace rc::cli
