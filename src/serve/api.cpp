#include "serve/api.hpp"

#include "core/engine/grant_json.hpp"
#include "core/identifier.hpp"

namespace rc::serve {

using nlohmann::json;

const char* endpoint_name(Endpoint e) {
  switch (e) {
    case Endpoint::receive: return "receive";
    case Endpoint::redpack: return "redpack_claim";
    case Endpoint::lottery: return "lottery_draw";
    case Endpoint::claims: return "claims";
    case Endpoint::grant_read: return "grant_read";
    case Endpoint::healthz: return "healthz";
    case Endpoint::readyz: return "readyz";
    case Endpoint::metrics: return "metrics";
    case Endpoint::other: return "other";
  }
  return "other";
}

namespace {

// The table (docs/serve.md "Codes"): 0 answers a grant; 1xxx a refusal the caller shows its user
// (HTTP 200); 4xxx and 5xxx a request that was not decided (the HTTP status is the code's first
// three digits, so that a log line's code alone says what the gateway saw).
const Code kOk{0, 200, "ok", "granted", "领取成功"};
const Code kReasons[] = {
    {1000, 200, "none", "granted", "领取成功"},  // (Reason::none: never answered as a refusal)
    {1001, 200, "not_found", "no such activity or prize", "活动不存在"},
    {1002, 200, "not_live", "the activity is not open", "活动未上线"},
    {1003, 200, "not_started", "the activity has not started", "活动未开始"},
    {1004, 200, "ended", "the activity has ended", "活动已结束"},
    {1005, 200, "paused", "the activity is paused", "活动已暂停"},
    {1006, 200, "not_in_gray_list", "the activity is not open to this user yet", "活动暂未对您开放"},
    {1007, 200, "not_qualified", "the user is not qualified", "没有领取资格"},
    {1008, 200, "qualification_used", "the user's qualification was used already", "资格已被使用"},
    {1009, 200, "blacklisted", "the user may not claim in this activity", "暂时无法领取"},
    {1010, 200, "limit_reached", "the user's limit is reached", "已达个人领取上限"},
    {1011, 200, "sold_out", "sold out", "活动库存已领完"},
    {1012, 200, "budget_exhausted", "the budget is used up", "手慢了，奖励已被领完"},
    {1013, 200, "budget_degrade", "the budget allows only a smaller prize", "预算不足，仅可领取普通奖励"},
    {1014, 200, "held_by_fuse", "the request is held for review and will be decided later", "请求已受理，正在审核"},
    {1015, 200, "biz_id_conflict", "the idempotency key belongs to another request", "幂等号已被其他请求使用"},
};
static_assert(sizeof kReasons / sizeof kReasons[0] == static_cast<size_t>(Reason::biz_id_conflict) + 1,
              "one code per Reason, in declaration order");

const Code kFailures[] = {
    {4000, 400, "bad_request", "bad request", "请求参数错误"},
    {4010, 401, "unauthorized", "a valid bearer token is needed", "未授权"},
    {4040, 404, "no_such_path", "no such endpoint", "接口不存在"},
    {4041, 404, "grant_not_found", "no grant with this idempotency key", "领取记录不存在"},
    {4050, 405, "method_not_allowed", "method not allowed", "请求方法不支持"},
    {4110, 411, "length_required", "the body needs a Content-Length", "请求需要 Content-Length"},
    {4130, 413, "too_large", "the request is too large", "请求体过大"},
    {4290, 429, "rate_limited", "too many requests: try again shortly", "系统繁忙，请稍后再试"},
    {5000, 500, "internal", "internal error", "系统异常，请稍后再试"},
    {5030, 503, "unavailable", "the service is busy: try again shortly", "系统繁忙，请稍后再试"},
    {5031, 503, "shutting_down", "the service is restarting: try again shortly", "服务重启中，请稍后再试"},
};
static_assert(sizeof kFailures / sizeof kFailures[0] == static_cast<size_t>(Failure::shutting_down) + 1,
              "one code per Failure, in declaration order");

// The body as a JSON object, or BadRequest.
json parse_object(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw BadRequest{"", "the body is not JSON (or not UTF-8)"};
  if (!j.is_object()) throw BadRequest{"", "the body must be a JSON object"};
  return j;
}

// An identifier field: a string (or, with numbers_too, a non-negative integer), checked by the
// edge's rules. Empty optional when absent (or null) and not required.
std::optional<std::string> id_field(const json& j, const char* field, IdKind kind, bool required, bool numbers_too) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) {
    if (required) throw BadRequest{field, "is missing"};
    return std::nullopt;
  }
  std::string raw;
  if (it->is_string()) raw = it->get<std::string>();
  else if (numbers_too && it->is_number_unsigned()) raw = std::to_string(it->get<uint64_t>());
  else if (numbers_too && it->is_number_integer()) throw BadRequest{field, "must not be negative"};
  else throw BadRequest{field, numbers_too ? "must be a string or a non-negative integer" : "must be a string"};
  std::string v = trim_identifier(raw);
  if (auto e = identifier_error(v, kind, field); !e.empty()) throw BadRequest{field, e};
  return v;
}

std::string status_word(const engine::ClaimOutcome& o) {
  return o.grant ? name(o.grant->state) : engine::status_name(o.status);
}

}  // namespace

const Code& ok_code() { return kOk; }
const Code& code_of(Reason r) { return kReasons[static_cast<size_t>(r)]; }
const Code& code_of(Failure f) { return kFailures[static_cast<size_t>(f)]; }

std::vector<Code> all_codes() {
  std::vector<Code> out{kOk};
  for (auto& c : kReasons)
    if (c.code != 1000) out.push_back(c);
  for (auto& c : kFailures) out.push_back(c);
  return out;
}

std::optional<Locale> parse_locale(const std::string& s) {
  if (s == "en") return Locale::en;
  if (s == "zh") return Locale::zh;
  return std::nullopt;
}

const char* message(const Code& c, Locale l) { return l == Locale::zh ? c.zh : c.en; }

engine::ClaimRequest parse_claim(Endpoint e, const std::string& body, const std::string& x_user_id) {
  json j = parse_object(body);
  engine::ClaimRequest r;
  switch (e) {
    case Endpoint::receive:
      r.activity = *id_field(j, "activityCode", IdKind::key, true, false);
      r.user = *id_field(j, "userId", IdKind::user, true, true);
      r.biz_id = *id_field(j, "bizId", IdKind::key, true, false);
      r.source = id_field(j, "channel", IdKind::user, false, false);
      break;
    case Endpoint::redpack: {
      r.activity = *id_field(j, "batchId", IdKind::key, true, true);
      r.user = *id_field(j, "userId", IdKind::user, true, true);
      auto instance = id_field(j, "instanceId", IdKind::key, false, true);
      if (auto rid = id_field(j, "requestId", IdKind::key, false, false)) {
        r.biz_id = *rid;
      } else {
        // the server's own key, stable across the caller's retries (docs/serve.md): one claim per
        // user, batch and instance
        r.biz_id = r.user + "_" + r.activity + (instance ? "_" + *instance : "");
        if (auto err = identifier_error(r.biz_id, IdKind::key, "userId_batchId_instanceId"); !err.empty())
          throw BadRequest{"requestId", "is missing and " + err};
      }
      break;
    }
    case Endpoint::lottery: {
      r.activity = *id_field(j, "activityCode", IdKind::key, true, false);
      r.biz_id = *id_field(j, "requestId", IdKind::key, true, false);
      if (x_user_id.empty()) throw BadRequest{"X-User-Id", "the header is missing (set by the gateway)"};
      std::string u = trim_identifier(x_user_id);
      if (auto err = identifier_error(u, IdKind::user, "X-User-Id"); !err.empty()) throw BadRequest{"X-User-Id", err};
      r.user = u;
      break;
    }
    case Endpoint::claims:
      r.activity = *id_field(j, "activity", IdKind::key, true, false);
      r.user = *id_field(j, "user", IdKind::user, true, true);
      r.biz_id = *id_field(j, "biz_id", IdKind::key, true, false);
      r.source = id_field(j, "channel", IdKind::user, false, false);
      break;
    default:
      throw BadRequest{"", "not a claim endpoint"};
  }
  return r;
}

std::string parse_biz_id(const std::string& raw) {
  std::string v = trim_identifier(raw);
  if (auto e = identifier_error(v, IdKind::key, "biz_id"); !e.empty()) throw BadRequest{"biz_id", e};
  return v;
}

json answer(Endpoint e, const engine::ClaimOutcome& o, const engine::ClaimRequest& r, const AnswerExtra& extra,
            Locale l) {
  const bool made = o.status == engine::Status::granted || o.status == engine::Status::replayed;
  const Code& c = made ? ok_code() : code_of(o.reason);
  json data = nullptr;
  const bool replayed = o.status == engine::Status::replayed;
  if (e == Endpoint::claims) {
    data = json{{"outcome", engine::status_name(o.status)}, {"activity", r.activity}, {"user", r.user},
                {"biz_id", r.biz_id}, {"replayed", replayed}};
    if (o.reason != Reason::none) data["reason"] = name(o.reason);
    if (o.grant) {
      auto g = engine::grant_json(*o.grant);
      for (auto it = g.begin(); it != g.end(); ++it)
        if (!data.contains(it.key())) data[it.key()] = it.value();
    }
  } else if (o.grant) {  // granted, replayed, held (a pending grant)
    const auto& g = *o.grant;
    data = json{{"claimId", g.record_code}, {"amount", g.amount}, {"status", status_word(o)}, {"replayed", replayed}};
    if (e == Endpoint::receive) {
      data["bizId"] = g.biz_id;
      data["rewardCode"] = g.prize;
    } else if (e == Endpoint::redpack) {
      data["requestId"] = g.biz_id;
    } else if (e == Endpoint::lottery) {
      data["requestId"] = g.biz_id;
      data["prizeCode"] = g.prize;
      data["prizeName"] = g.item;
      data["prizeKind"] = g.item_kind;
      data["consolation"] = extra.consolation;
    }
  }
  return json{{"code", c.code}, {"message", message(c, l)}, {"data", data}};
}

json failure(Failure f, Locale l, const std::string& detail) {
  const Code& c = code_of(f);
  std::string m = message(c, l);
  if (!detail.empty() && f != Failure::internal) m += ": " + detail;
  return json{{"code", c.code}, {"message", m}, {"data", nullptr}};
}

}  // namespace rc::serve
