// serve/api.cpp: the contracts without a socket: the code table, each endpoint's field rules, the
// answers' shapes; serve/rate.cpp: the per-user bucket; serve/server.cpp: token matching.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "serve/api.hpp"
#include "serve/rate.hpp"
#include "serve/server.hpp"

using namespace rc;
using namespace rc::serve;
using nlohmann::json;

TEST_CASE("serve api: every reason has its own code and both messages, and the table lists each code once") {
  std::set<int> codes;
  std::set<std::string> words;
  for (auto& c : all_codes()) {
    CHECK_MESSAGE(codes.insert(c.code).second, "code " << c.code << " twice");
    CHECK_MESSAGE(words.insert(c.word).second, "word " << c.word << " twice");
    CHECK(std::string(c.en) != "");
    CHECK(std::string(c.zh) != "");
  }
  for (auto& [r, n] : names(Reason{})) {
    if (r == Reason::none) continue;
    const Code& c = code_of(r);
    CHECK(std::string(c.word) == n);  // the code's word is the reason's name
    CHECK(c.http == 200);             // a refusal is never an HTTP error (a gateway would retry it)
    CHECK(codes.count(c.code) == 1);
  }
  CHECK(code_of(Failure::bad_request).http == 400);
  CHECK(code_of(Failure::unauthorized).http == 401);
  CHECK(code_of(Failure::too_large).http == 413);
  CHECK(code_of(Failure::rate_limited).http == 429);
  CHECK(code_of(Failure::unavailable).http == 503);
  CHECK(std::string(code_of(Failure::rate_limited).zh) == "系统繁忙，请稍后再试");
  CHECK(ok_code().code == 0);
}

TEST_CASE("serve api: each endpoint's fields become the claim, userId as a string or an integer") {
  SUBCASE("receive") {
    auto r = parse_claim(Endpoint::receive,
                         R"({"activityCode":"zsff_2025","userId":10001,"bizId":"click-1","channel":"APP"})", "");
    CHECK(r.activity == "zsff_2025");
    CHECK(r.user == "10001");
    CHECK(r.biz_id == "click-1");
    CHECK(r.source.value_or("") == "APP");
    auto s = parse_claim(Endpoint::receive, R"({"activityCode":"a","userId":" u1 ","bizId":"b"})", "");
    CHECK(s.user == "u1");  // trimmed, as every edge trims
    CHECK(!s.source);
  }
  SUBCASE("redpack builds userId_batchId_instanceId without a requestId") {
    auto r = parse_claim(Endpoint::redpack, R"({"batchId":"rp1","instanceId":7,"userId":"u9"})", "");
    CHECK(r.activity == "rp1");
    CHECK(r.biz_id == "u9_rp1_7");
    auto s = parse_claim(Endpoint::redpack, R"({"batchId":"rp1","userId":"u9"})", "");
    CHECK(s.biz_id == "u9_rp1");
    auto t = parse_claim(Endpoint::redpack, R"({"batchId":"rp1","userId":"u9","requestId":"req-1"})", "");
    CHECK(t.biz_id == "req-1");
  }
  SUBCASE("lottery takes the user from X-User-Id") {
    auto r = parse_claim(Endpoint::lottery, R"({"activityCode":"draw","requestId":"k1"})", "u5");
    CHECK(r.user == "u5");
    CHECK(r.biz_id == "k1");
    CHECK_THROWS_AS(parse_claim(Endpoint::lottery, R"({"activityCode":"draw","requestId":"k1"})", ""), BadRequest);
  }
  SUBCASE("claims") {
    auto r = parse_claim(Endpoint::claims, R"({"activity":"a","user":"u","biz_id":"b","channel":"web"})", "");
    CHECK(r.activity == "a");
    CHECK(r.source.value_or("") == "web");
  }
}

TEST_CASE("serve api: a malformed body is refused naming the field") {
  auto why = [](Endpoint e, const std::string& body, const std::string& hdr = "u") {
    try {
      parse_claim(e, body, hdr);
    } catch (const BadRequest& b) {
      return b.message();
    }
    return std::string("accepted");
  };
  CHECK(why(Endpoint::receive, "not json").find("not JSON") != std::string::npos);
  CHECK(why(Endpoint::receive, "[1,2]").find("object") != std::string::npos);
  CHECK(why(Endpoint::receive, R"({"userId":1,"bizId":"b"})").rfind("activityCode", 0) == 0);
  CHECK(why(Endpoint::receive, R"({"activityCode":"a","bizId":"b"})").rfind("userId", 0) == 0);
  CHECK(why(Endpoint::receive, R"({"activityCode":"a","userId":1})").rfind("bizId", 0) == 0);
  CHECK(why(Endpoint::receive, R"({"activityCode":"a","userId":1.5,"bizId":"b"})").rfind("userId", 0) == 0);
  CHECK(why(Endpoint::receive, R"({"activityCode":"a","userId":-3,"bizId":"b"})").find("negative") != std::string::npos);
  CHECK(why(Endpoint::receive, R"({"activityCode":"a","userId":"u","bizId":7})").rfind("bizId", 0) == 0);
  CHECK(why(Endpoint::receive, R"({"activityCode":"a","userId":"u","bizId":""})").rfind("bizId", 0) == 0);
  CHECK(why(Endpoint::receive, R"({"activityCode":"a","userId":"u\u0001","bizId":"b"})").rfind("userId", 0) == 0);
  CHECK(why(Endpoint::receive, "{\"activityCode\":\"a\",\"userId\":\"u\",\"bizId\":\"b\xe2\x80\x8b" "c\"}").rfind("bizId", 0) == 0);
  CHECK(why(Endpoint::receive, "{\"activityCode\":\"a\",\"userId\":\"\xff\xfe\",\"bizId\":\"b\"}").find("not JSON") !=
        std::string::npos);
  CHECK(why(Endpoint::receive, R"({"activityCode":"a","userId":"u","bizId":")" + std::string(8192, 'x') + "\"}")
            .rfind("bizId", 0) == 0);
  CHECK(why(Endpoint::lottery, R"({"activityCode":"a","requestId":"r"})", std::string(100, 'u')).rfind("X-User-Id", 0) == 0);
  // a built key longer than an idempotency key may be (128 bytes): the caller must send its own
  CHECK(why(Endpoint::redpack, R"({"batchId":")" + std::string(100, 'b') + R"(","userId":")" + std::string(64, 'u') + "\"}")
            .rfind("requestId", 0) == 0);
  CHECK_THROWS_AS(parse_biz_id(""), BadRequest);
  CHECK(parse_biz_id("k 1") == "k 1");
}

TEST_CASE("serve api: answers carry code, message and the endpoint's data") {
  engine::ClaimRequest r;
  r.activity = "a";
  r.user = "u";
  r.biz_id = "b";
  engine::ClaimOutcome o;
  o.status = engine::Status::granted;
  engine::GrantView g;
  g.record_code = "R1";
  g.biz_id = "b";
  g.prize = "p";
  g.item = "points";
  g.item_kind = "points";
  g.amount = 250;
  g.state = GrantState::success;
  o.grant = g;
  auto j = answer(Endpoint::redpack, o, r, {}, Locale::en);
  CHECK(j["code"] == 0);
  CHECK(j["data"]["claimId"] == "R1");
  CHECK(j["data"]["amount"] == 250);
  CHECK(j["data"]["status"] == "success");
  CHECK(j["data"]["replayed"] == false);
  auto l = answer(Endpoint::lottery, o, r, AnswerExtra{true}, Locale::zh);
  CHECK(l["data"]["prizeCode"] == "p");
  CHECK(l["data"]["consolation"] == true);
  CHECK(l["message"] == "领取成功");
  o.status = engine::Status::replayed;
  CHECK(answer(Endpoint::receive, o, r, {}, Locale::en)["data"]["replayed"] == true);
  engine::ClaimOutcome no;
  no.status = engine::Status::rejected;
  no.reason = Reason::sold_out;
  auto s = answer(Endpoint::receive, no, r, {}, Locale::zh);
  CHECK(s["code"] == 1011);
  CHECK(s["message"] == "活动库存已领完");
  CHECK(s["data"].is_null());
  auto c = answer(Endpoint::claims, no, r, {}, Locale::en);
  CHECK(c["data"]["reason"] == "sold_out");
  CHECK(c["data"]["outcome"] == "rejected");
  auto f = failure(Failure::internal, Locale::en, "SELECT secret FROM x");
  CHECK(f["message"] == "internal error");  // no SQL or stack trace leaves the server
  CHECK(failure(Failure::bad_request, Locale::en, "userId: is missing")["message"] == "bad request: userId: is missing");
}

TEST_CASE("serve rate: a user's bucket refills at the rate, other users are apart") {
  UserRate r(5, 5);
  int64_t t = 1'000'000;
  for (int i = 0; i < 5; ++i) CHECK(r.allow("u1", t));
  CHECK_FALSE(r.allow("u1", t));
  CHECK(r.allow("u2", t));             // another user has a bucket of their own
  CHECK(r.allow("u1", t + 200'000));   // 0.2 s at 5/s: one token back
  CHECK_FALSE(r.allow("u1", t + 200'000));
  UserRate off(0, 0);
  for (int i = 0; i < 100; ++i) CHECK(off.allow("u", t));
}

TEST_CASE("serve tokens: only the exact bearer token matches, by name") {
  std::vector<Token> toks{{"shop", "0123456789abcdef-shop"}, {"game", "0123456789abcdef-game"}};
  CHECK(match_token(toks, "Bearer 0123456789abcdef-game") == "game");
  CHECK(match_token(toks, "Bearer 0123456789abcdef-shop") == "shop");
  CHECK(match_token(toks, "Bearer 0123456789abcdef-sho") == "");
  CHECK(match_token(toks, "Bearer ") == "");
  CHECK(match_token(toks, "bearer 0123456789abcdef-shop") == "");
  CHECK(match_token(toks, "0123456789abcdef-shop") == "");
  CHECK(match_token(toks, "") == "");
  CHECK(is_loopback("127.0.0.1"));
  CHECK(is_loopback("127.8.9.1"));
  CHECK(is_loopback("::1"));
  CHECK_FALSE(is_loopback("0.0.0.0"));
  CHECK_FALSE(is_loopback("10.0.0.1"));
}

namespace {
std::string slurp(const std::string& rel) {
  std::ifstream f(std::string(REWARDCTL_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST_CASE("serve docs: docs/serve.md and the man page list every code, its HTTP status, word and messages") {
  const std::string doc = slurp("docs/serve.md"), man = slurp("man/rewardctl.1.scd");
  REQUIRE(!doc.empty());
  REQUIRE(!man.empty());
  for (auto& c : all_codes()) {
    std::string row = "| " + std::to_string(c.code) + " | " + std::to_string(c.http) + " | " + c.word + " | " + c.en +
                      " | " + c.zh + " |";
    CHECK_MESSAGE(doc.find(row) != std::string::npos, "docs/serve.md lacks the row " << row);
    std::string man_row = "|  " + std::to_string(c.code) + "\n:  " + std::to_string(c.http) + "\n:  " + c.word + "\n:  " + c.en;
    CHECK_MESSAGE(man.find(man_row) != std::string::npos, "the man page lacks the row of " << c.code);
  }
}
