#pragma once
// The HTTP contracts of `rewardctl serve` without the HTTP: which endpoints exist, how each one's
// JSON body becomes an engine::ClaimRequest, how an outcome becomes the answer {code, message,
// data}, and the one table of answer codes (docs/serve.md). Pure functions, so that every field
// rule is unit-tested without a socket; the server (server.hpp) only moves bytes.
//
// Business refusals are HTTP 200 with their own code: a 5xx makes a gateway retry a request whose
// answer would not change (docs/serve.md "Codes"). Only malformed requests (4xx) and a database
// that cannot answer (503) are HTTP errors.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/engine.hpp"

namespace rc::serve {

enum class Endpoint {
  receive,     // POST /api/receive {activityCode, userId, bizId, channel}
  redpack,     // POST /api/v1/redpack/claim {batchId, instanceId?, userId, requestId?}
  lottery,     // POST /api/lottery/draw {activityCode, requestId}, the user from X-User-Id
  claims,      // POST /v1/claims {activity, user, biz_id, channel?}: claim -o json's fields
  grant_read,  // GET /v1/grants/{biz_id}
  healthz,     // GET /healthz
  readyz,      // GET /readyz
  metrics,     // GET /metrics
  other,       // anything else (404)
};
const char* endpoint_name(Endpoint e);  // the label in logs and /metrics: "receive", "claims", ...

// Request-level failures: the request could not be decided (HTTP 4xx/5xx).
enum class Failure {
  bad_request,         // 400: not JSON, a missing or mistyped field, an identifier the rules refuse
  unauthorized,        // 401: no or unknown bearer token
  no_such_path,        // 404: no endpoint here
  grant_not_found,     // 404: GET /v1/grants/{biz_id} of a biz id with no grant
  method_not_allowed,  // 405
  length_required,     // 411: a POST body without Content-Length (chunked), refused before it is read
  too_large,           // 413: body over [serve] max_body_bytes
  rate_limited,        // 429: the user's rate ([serve] user_rate) is used up
  internal,            // 500: a bug (logged with the request; the answer says nothing more)
  unavailable,         // 503 + Retry-After: the database is unreachable, busy past its retries
  shutting_down,       // 503 + Retry-After: the server is stopping
};

// One row of the code table: every answer's `code`, its HTTP status, the word that logs and
// metrics show, and the message in each locale.
struct Code {
  int code;
  int http;
  const char* word;
  const char* en;
  const char* zh;
};
const Code& ok_code();                // 0: granted, or a replay of the same grant
const Code& code_of(Reason r);        // a refusal, or held_by_fuse (never Reason::none)
const Code& code_of(Failure f);
// Every row, ok first: the man page and docs/serve.md list exactly these (a test holds them).
std::vector<Code> all_codes();

enum class Locale { en, zh };
std::optional<Locale> parse_locale(const std::string& s);
const char* message(const Code& c, Locale l);

// A request refused before the engine: which field and why ("userId must be a string or an
// integer"). Answered 400 with code_of(Failure::bad_request) and this text as the message.
struct BadRequest {
  std::string field, why;
  std::string message() const { return field.empty() ? why : field + ": " + why; }
};

// The claim that endpoint e's body asks for; x_user_id is the X-User-Id header (lottery only,
// empty when absent). Throws BadRequest. Every identifier goes through the edge's rules
// (core/identifier.hpp); a userId given as a JSON number must be a non-negative integer.
// REQUIRES: e is receive, redpack, lottery or claims.
engine::ClaimRequest parse_claim(Endpoint e, const std::string& body, const std::string& x_user_id);

// A biz id from a path segment (GET /v1/grants/{biz_id}, percent-decoded by the server). Throws
// BadRequest.
std::string parse_biz_id(const std::string& raw);

// What the answer needs beyond the outcome: the lottery's consolation flag of the prize drawn.
struct AnswerExtra {
  bool consolation = false;
};

// The answer {code, message, data} of endpoint e for outcome o (granted, replayed, rejected or
// held). The code's HTTP status is code_of(...).http (200 for every outcome).
nlohmann::json answer(Endpoint e, const engine::ClaimOutcome& o, const engine::ClaimRequest& r,
                      const AnswerExtra& extra, Locale l);
// The answer of a failure: {code, message, data: null}; `detail` replaces the table's message
// when given (a BadRequest's text), never for internal (no stack trace or SQL leaves the server).
nlohmann::json failure(Failure f, Locale l, const std::string& detail = "");

}  // namespace rc::serve
