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

TEST_CASE("identifier: an invisible character is refused, naming it and where it is") {
  // evil + U+200B ZERO WIDTH SPACE: not the user `evil`
  CHECK(identifier_error("evil\xE2\x80\x8B", IdKind::user, "--user") ==
        "--user holds an invisible character U+200B at character 5 (byte 4)");
  // a user id made only of U+200B is not trimmed away (it is not white space): it is refused as invisible
  CHECK(trim_identifier("\xE2\x80\x8B") == "\xE2\x80\x8B");
  CHECK(identifier_error(trim_identifier(" \xE2\x80\x8B "), IdKind::user, "--user") ==
        "--user holds an invisible character U+200B at character 1 (byte 0)");
  // U+202E RIGHT-TO-LEFT OVERRIDE after two characters of which one is two bytes
  CHECK(identifier_error("\xC3\xA9x\xE2\x80\xAEgpj", IdKind::user, "user_id") ==
        "user_id holds an invisible character U+202E at character 3 (byte 3)");
  // a tag character (U+E0041 TAG LATIN CAPITAL LETTER A), four bytes
  CHECK(identifier_error("u\xF3\xA0\x81\x81", IdKind::user, "--user") ==
        "--user holds an invisible character U+E0041 at character 2 (byte 1)");
  // an idempotency key follows the same rule
  CHECK(identifier_error("order-1\xE2\x80\x8D", IdKind::key, "--biz-id") ==
        "--biz-id holds an invisible character U+200D at character 8 (byte 7)");
  // the rest of the set: Cf and the other default-ignorable code points that render as nothing
  struct Case {
    const char* utf8;
    const char* cp;
  };
  for (const Case& c : {Case{"\xC2\xAD", "U+00AD"}, Case{"\xCD\x8F", "U+034F"}, Case{"\xE1\x85\x9F", "U+115F"},
                        Case{"\xE1\x85\xA0", "U+1160"}, Case{"\xE1\x9E\xB4", "U+17B4"}, Case{"\xE1\xA0\x8B", "U+180B"},
                        Case{"\xE1\xA0\x8E", "U+180E"}, Case{"\xE2\x80\x8C", "U+200C"}, Case{"\xE2\x80\x8F", "U+200F"},
                        Case{"\xE2\x80\xAA", "U+202A"}, Case{"\xE2\x81\xA0", "U+2060"}, Case{"\xE2\x81\xA4", "U+2064"},
                        Case{"\xE2\x81\xA6", "U+2066"}, Case{"\xE2\x81\xA9", "U+2069"}, Case{"\xE3\x85\xA4", "U+3164"},
                        Case{"\xEF\xB8\x80", "U+FE00"}, Case{"\xEF\xB8\x8F", "U+FE0F"}, Case{"\xEF\xBB\xBF", "U+FEFF"},
                        Case{"\xEF\xBE\xA0", "U+FFA0"}, Case{"\xF3\xA0\x80\x81", "U+E0001"},
                        Case{"\xF3\xA0\x84\x80", "U+E0100"}, Case{"\xF3\xA0\x87\xAF", "U+E01EF"}}) {
    CAPTURE(c.cp);
    // inside the id (U+FEFF at an end is trimmed as a byte-order mark; inside it is refused)
    CHECK(identifier_error(std::string("ab") + c.utf8 + "c", IdKind::user, "--user") ==
          std::string("--user holds an invisible character ") + c.cp + " at character 3 (byte 2)");
  }
  // the existing rules come first: a control character, then the length
  CHECK(identifier_error("a\x01\xE2\x80\x8B", IdKind::user, "--user") == "--user holds a control character");
  CHECK(identifier_error(std::string(63, 'u') + "\xE2\x80\x8B", IdKind::user, "--user") ==
        "--user is 66 bytes, at most 64");
}

TEST_CASE("identifier: text not in NFC is refused (never rewritten), naming where and why") {
  // café as e + U+0301 COMBINING ACUTE ACCENT (NFD): the position is the e the accent belongs to
  CHECK(identifier_error("cafe\xCC\x81", IdKind::user, "--user") ==
        "--user is not in Unicode NFC (character 4, byte 3, U+0301 combines with what precedes it; send the composed form)");
  CHECK(identifier_error("\xE7\x94\xA8\xE6\x88\xB7" "e\xCC\x81", IdKind::user, "user_id") ==
        "user_id is not in Unicode NFC (character 3, byte 6, U+0301 combines with what precedes it; send the composed form)");
  // Hangul jamo that compose into one syllable (U+1100 U+1161 = U+AC00)
  CHECK(identifier_error("\xE1\x84\x80\xE1\x85\xA1", IdKind::user, "--user") ==
        "--user is not in Unicode NFC (character 1, byte 0, U+1161 combines with what precedes it; send the composed form)");
  // a singleton: U+212B ANGSTROM SIGN is U+00C5 in NFC
  CHECK(identifier_error("\xE2\x84\xAB", IdKind::user, "--user") ==
        "--user is not in Unicode NFC (character 1, byte 0, U+212B is written U+00C5 in NFC; send that)");
  // marks out of canonical order (U+0301 class 230 before U+0323 class 220) on a letter they do not compose with
  CHECK(identifier_error("x\xCC\x81\xCC\xA3", IdKind::user, "--user") ==
        "--user is not in Unicode NFC (character 1, byte 0, U+0323 must come before U+0301 (canonical order); send the NFC form)");
  // a biz id is held to the same rule
  CHECK(identifier_error("order-e\xCC\x81", IdKind::key, "--biz-id").rfind("--biz-id is not in Unicode NFC (character 7, byte 6", 0) == 0);
}

TEST_CASE("identifier: NFC text with letters of any script is accepted") {
  CHECK(identifier_error("caf\xC3\xA9", IdKind::user, "--user").empty());  // café, NFC (U+00E9)
  CHECK(identifier_error("用户一", IdKind::user, "--user").empty());
  CHECK(identifier_error("\xC3\x85ngstr\xC3\xB6m", IdKind::user, "--user").empty());  // Ångström, NFC
  CHECK(identifier_error("x\xCC\x81", IdKind::user, "--user").empty());  // x + U+0301: nothing to compose, NFC
  CHECK(identifier_error("\xEA\xB0\x80", IdKind::user, "--user").empty());  // U+AC00, composed Hangul
  CHECK(identifier_error("u-1_2.3@example.com", IdKind::user, "--user").empty());
  CHECK(identifier_error("u 1", IdKind::user, "--user").empty());
  CHECK(identifier_error("order-2027/06/30#1", IdKind::key, "--biz-id").empty());
}

TEST_CASE("identifier: a flag with an invisible character or not in NFC is a usage error (64)") {
  for (const char* bad : {"evil\xE2\x80\x8B", "cafe\xCC\x81", "\xE2\x80\x8B", "a\xE2\x80\xAE" "b"}) {
    CAPTURE(bad);
    try {
      require_identifier(bad, IdKind::user, "--user");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == Errc::usage);
      CHECK(exit_code(e.kind()) == Exit::usage);
      CHECK(std::string(e.what()).rfind("--user ", 0) == 0);
      CHECK(std::string(e.what()).find("see IDENTIFIERS in rewardctl(1)") != std::string::npos);
    }
  }
  CHECK(require_identifier(" caf\xC3\xA9 ", IdKind::user, "--user") == "caf\xC3\xA9");
}

TEST_CASE("identifier: identifier_text_clean is the text rules without trimming or length") {
  CHECK(identifier_text_clean(""));
  CHECK(identifier_text_clean("u1"));
  CHECK(identifier_text_clean("caf\xC3\xA9"));
  CHECK(identifier_text_clean("用户一"));
  CHECK(identifier_text_clean(std::string(8000, 'a')));  // no length rule
  CHECK(identifier_text_clean(" u1 "));                  // no trimming rule: spaces are visible
  CHECK_FALSE(identifier_text_clean("cafe\xCC\x81"));    // NFD
  CHECK_FALSE(identifier_text_clean("evil\xE2\x80\x8B"));
  CHECK_FALSE(identifier_text_clean("\xE2\x80\x8B"));
  CHECK_FALSE(identifier_text_clean("a\xE2\x80\xAE" "b"));
  CHECK_FALSE(identifier_text_clean("u\xF3\xA0\x81\x81"));
  CHECK_FALSE(identifier_text_clean("\xEF\xBB\xBFu1"));  // a byte-order mark is refused once stored
  CHECK_FALSE(identifier_text_clean("a\x01"));
  CHECK_FALSE(identifier_text_clean("a\x7f"));
  CHECK_FALSE(identifier_text_clean("a\xC2\x85"));
  CHECK_FALSE(identifier_text_clean(std::string("a\0b", 3)));
  CHECK_FALSE(identifier_text_clean("\xff\xfe"));
  CHECK_FALSE(identifier_text_clean("\xE2\x84\xAB"));  // U+212B ANGSTROM SIGN
}

namespace {

std::string utf8_of(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
  return s;
}

bool in_ranges(const std::vector<std::pair<char32_t, char32_t>>& r, char32_t c) {
  for (auto& [a, b] : r)
    if (a <= c && c <= b) return true;
  return false;
}

}  // namespace

TEST_CASE("identifier: refused_code_point_ranges is the refused set, sorted, merged, computed once") {
  const auto& r = refused_code_point_ranges();
  REQUIRE(!r.empty());
  CHECK(&r == &refused_code_point_ranges());  // computed once
  for (size_t i = 0; i < r.size(); ++i) {
    CAPTURE(i);
    CHECK(r[i].first <= r[i].second);
    if (i) CHECK(r[i - 1].second + 1 < r[i].first);  // sorted, and adjacent ranges merged
  }
  CHECK(r.front() == std::pair<char32_t, char32_t>(0x00, 0x1F));  // C0 controls first
  for (char32_t c : {0x7F, 0x80, 0x9F, 0xAD, 0x34F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180F, 0x200B, 0x200F,
                     0x202A, 0x202E, 0x2060, 0x2064, 0x2066, 0x2069, 0x3164, 0xFE00, 0xFE0F, 0xFEFF, 0xFFA0, 0xE0001,
                     0xE0020, 0xE007F, 0xE0100, 0xE01EF}) {
    CAPTURE(static_cast<uint32_t>(c));
    CHECK(in_ranges(r, c));
  }
  for (char32_t c : {0x20, 0x41, 0x7E, 0xA0, 0xE9, 0x301, 0x3000, 0x7528, 0xAC00, 0x1F600}) {
    CAPTURE(static_cast<uint32_t>(c));
    CHECK_FALSE(in_ranges(r, c));
  }
  for (auto& [a, b] : r) {
    if (a >= 0xD800 && a <= 0xDFFF) FAIL("a surrogate in the set");
    // every end of every range is refused by identifier_text_clean, the same set
    CAPTURE(static_cast<uint32_t>(a));
    CHECK_FALSE(identifier_text_clean("x" + utf8_of(a)));
    CHECK_FALSE(identifier_text_clean("x" + utf8_of(b)));
  }
}
