// core/identifier.cpp: the one set of identifier rules every edge applies.
#include <doctest/doctest.h>

#include "base/error.hpp"
#include "core/identifier.hpp"

using namespace rc;

TEST_CASE("identifier: trimmed, then non-empty, valid UTF-8, no control characters, at most its length") {
  CHECK(trim_identifier(" \tu1 \r\n") == "u1");
  CHECK(trim_identifier("\xE3\x80\x80u1\xC2\xA0\xEF\xBB\xBF") == "u1");  // U+3000, U+00A0, U+FEFF
  CHECK(trim_identifier("u 1") == "u 1");
  CHECK(identifier_error("", IdKind::user, "--user") == "--user is empty");
  CHECK(identifier_error(trim_identifier("   "), IdKind::user, "--user") == "--user is empty");
  CHECK(identifier_error("u\x01", IdKind::user, "--user") == "--user holds a control character");
  CHECK(identifier_error("b\x7f", IdKind::key, "--biz-id") == "--biz-id holds a control character");
  CHECK(identifier_error("a\xC2\x85", IdKind::key, "k") == "k holds a control character");  // U+0085
  CHECK(identifier_error("\xff\xfe", IdKind::user, "--user") == "--user is not valid UTF-8");
  CHECK(identifier_error("\xC0\xAF", IdKind::user, "--user") == "--user is not valid UTF-8");  // overlong '/'
  CHECK(identifier_error(std::string(64, 'u'), IdKind::user, "--user").empty());
  CHECK(identifier_error(std::string(65, 'u'), IdKind::user, "--user") == "--user is 65 bytes, at most 64");
  CHECK(identifier_error(std::string(128, 'b'), IdKind::key, "--biz-id").empty());
  CHECK(identifier_error(std::string(8000, 'b'), IdKind::key, "--biz-id") == "--biz-id is 8000 bytes, at most 128");
  CHECK(identifier_error("用户一", IdKind::user, "--user").empty());
  CHECK(identifier_error("order-2027/06/30#1", IdKind::key, "--biz-id").empty());
}

TEST_CASE("identifier: a flag that breaks the rules is a usage error (64) naming the flag") {
  CHECK(require_identifier("  u1 ", IdKind::user, "--user") == "u1");
  try {
    require_identifier("", IdKind::key, "--biz-id");
    FAIL("an empty --biz-id was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == Errc::usage);
    CHECK(std::string(e.what()).rfind("--biz-id is empty", 0) == 0);
  }
}
