#include "core/identifier.hpp"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string_view>

#include "util/csv_reader.hpp"
#include "base/error.hpp"

namespace rc {

namespace {

// Length of a trimmable space at the start (front) or end of s[b, e), 0 when none.
size_t space_at(const std::string& s, size_t b, size_t e, bool front) {
  static const std::string_view kSpaces[] = {"\xC2\xA0", "\xE3\x80\x80", "\xEF\xBB\xBF"};
  char c = front ? s[b] : s[e - 1];
  if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f') return 1;
  std::string_view v(s.data() + b, e - b);
  for (auto sp : kSpaces) {
    if (v.size() < sp.size()) continue;
    if (front ? v.substr(0, sp.size()) == sp : v.substr(v.size() - sp.size()) == sp) return sp.size();
  }
  return 0;
}

// The one predicate of a refused code point (docs/design.md §4.1): a control character (Cc: C0,
// DEL, C1), a format character (Cf) or another Default_Ignorable_Code_Point (renders as nothing).
// refused_code_point_ranges() is computed from it, so the two never disagree.
bool control_char(UChar32 c) { return u_charType(c) == U_CONTROL_CHAR; }
bool invisible_char(UChar32 c) {
  return u_charType(c) == U_FORMAT_CHAR || u_hasBinaryProperty(c, UCHAR_DEFAULT_IGNORABLE_CODE_POINT);
}
bool refused_char(UChar32 c) { return control_char(c) || invisible_char(c); }

std::string code_point_name(UChar32 c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
  return buf;
}

// One code point of an identifier: its value and where it starts (in bytes, from 0).
struct CodePoint {
  UChar32 c;
  size_t byte;
};

// The code points of s, already known to be valid UTF-8.
std::vector<CodePoint> decode(std::string_view s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = p[i];
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : 3;
    UChar32 cp = n == 0 ? c : n == 1 ? (c & 0x1F) : n == 2 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k <= n; ++k) cp = (cp << 6) | (p[i + k] & 0x3F);
    out.push_back({cp, i});
    i += n + 1;
  }
  return out;
}

bool all_ascii(std::string_view s) {
  for (char ch : s)
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  return true;
}

const UNormalizer2* nfc() {
  static const UNormalizer2* n = [] {
    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2* r = unorm2_getNFCInstance(&err);
    if (U_FAILURE(err) || !r) throw Error(Errc::internal, std::string("ICU: no NFC normalizer: ") + u_errorName(err));
    return r;
  }();
  return n;
}

// UTF-16 text, and for each of its units the index of the code point it belongs to.
struct Utf16 {
  std::u16string text;
  std::vector<size_t> cp_index;
};

Utf16 to_utf16(const std::vector<CodePoint>& cps, size_t from, size_t to) {
  Utf16 u;
  for (size_t i = from; i < to; ++i) {
    UChar32 c = cps[i].c;
    if (c >= 0x10000) {
      u.text.push_back(static_cast<char16_t>(0xD7C0 + (c >> 10)));
      u.text.push_back(static_cast<char16_t>(0xDC00 | (c & 0x3FF)));
      u.cp_index.push_back(i);
      u.cp_index.push_back(i);
    } else {
      u.text.push_back(static_cast<char16_t>(c));
      u.cp_index.push_back(i);
    }
  }
  return u;
}

std::u16string normalize(const std::u16string& s) {
  UErrorCode err = U_ZERO_ERROR;
  std::u16string out(s.size() * 3 + 4, u'\0');
  int32_t n = unorm2_normalize(nfc(), reinterpret_cast<const UChar*>(s.data()), static_cast<int32_t>(s.size()),
                               reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &err);
  if (err == U_BUFFER_OVERFLOW_ERROR) {
    err = U_ZERO_ERROR;
    out.assign(static_cast<size_t>(n), u'\0');
    n = unorm2_normalize(nfc(), reinterpret_cast<const UChar*>(s.data()), static_cast<int32_t>(s.size()),
                         reinterpret_cast<UChar*>(out.data()), n, &err);
  }
  if (U_FAILURE(err)) throw Error(Errc::internal, std::string("ICU: NFC normalization failed: ") + u_errorName(err));
  out.resize(static_cast<size_t>(n));
  return out;
}

size_t count_code_points(const std::u16string& s) {
  size_t n = 0;
  for (char16_t u : s)
    if (u < 0xDC00 || u > 0xDFFF) ++n;
  return n;
}

std::string code_point_list(const std::u16string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    UChar32 c = s[i];
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < s.size()) c = 0x10000 + ((c - 0xD800) << 10) + (s[++i] - 0xDC00);
    if (!out.empty()) out += ' ';
    out += code_point_name(c);
  }
  return out;
}

// The first stretch of cps that NFC would change, as [first, last) code point indices, with the
// reason said for people; nullopt when cps is in NFC. The stretch starts at a normalization
// boundary (the character a mark combines with), which is where the position points.
struct NfcBreak {
  size_t first;
  std::string why;
};

std::optional<NfcBreak> first_nfc_break(const std::vector<CodePoint>& cps) {
  const UNormalizer2* n = nfc();
  Utf16 all = to_utf16(cps, 0, cps.size());
  const auto* text = reinterpret_cast<const UChar*>(all.text.data());
  const auto len = static_cast<int32_t>(all.text.size());
  UErrorCode err = U_ZERO_ERROR;
  if (unorm2_isNormalized(n, text, len, &err) && U_SUCCESS(err)) return std::nullopt;
  if (U_FAILURE(err)) throw Error(Errc::internal, std::string("ICU: NFC check failed: ") + u_errorName(err));
  int32_t pos = 0;
  while (pos < len) {
    err = U_ZERO_ERROR;
    int32_t yes = pos + unorm2_spanQuickCheckYes(n, text + pos, len - pos, &err);
    if (U_FAILURE(err)) throw Error(Errc::internal, std::string("ICU: NFC check failed: ") + u_errorName(err));
    if (yes >= len) break;
    // the segment from `yes` up to the next boundary: NFC changes it, or it only looked doubtful
    const size_t first = all.cp_index[static_cast<size_t>(yes)];
    size_t last = first + 1;
    while (last < cps.size() && !unorm2_hasBoundaryBefore(n, cps[last].c)) ++last;
    Utf16 seg = to_utf16(cps, first, last);
    std::u16string norm = normalize(seg.text);
    if (norm != seg.text) {
      for (size_t i = first; i < last; ++i) {
        const UChar32 c = cps[i].c;
        std::u16string one = to_utf16(cps, i, i + 1).text;
        std::u16string one_nfc = normalize(one);
        if (one_nfc != one)
          return NfcBreak{first, code_point_name(c) + " is written " + code_point_list(one_nfc) + " in NFC; send that"};
        if (i > first) {
          const UChar32 prev = cps[i - 1].c;
          if (u_getCombiningClass(c) != 0 && u_getCombiningClass(prev) > u_getCombiningClass(c))
            return NfcBreak{first, code_point_name(c) + " must come before " + code_point_name(prev) +
                                       " (canonical order); send the NFC form"};
          if (count_code_points(normalize(to_utf16(cps, first, i + 1).text)) < i + 1 - first)
            return NfcBreak{first, code_point_name(c) + " combines with what precedes it; send the composed form"};
        }
      }
      return NfcBreak{first, "send the NFC form " + code_point_list(norm)};
    }
    pos = last < cps.size() ? static_cast<int32_t>(std::find(all.cp_index.begin(), all.cp_index.end(), last) -
                                                   all.cp_index.begin())
                            : len;
  }
  // isNormalized said no, yet no segment changes: say so without a position
  return NfcBreak{cps.size(), "send the NFC form"};
}

std::vector<std::pair<char32_t, char32_t>> compute_refused_ranges() {
  std::vector<std::pair<char32_t, char32_t>> out;
  for (UChar32 c = 0; c <= 0x10FFFF; ++c) {
    if (c == 0xD800) c = 0xE000;  // surrogates are not text: valid UTF-8 never holds one
    if (!refused_char(c)) continue;
    const auto cc = static_cast<char32_t>(c);
    if (!out.empty() && out.back().second + 1 == cc)
      out.back().second = cc;
    else
      out.emplace_back(cc, cc);
  }
  return out;
}

}  // namespace

size_t max_identifier_bytes(IdKind k) { return k == IdKind::user ? kMaxUserIdBytes : kMaxKeyBytes; }

std::string trim_identifier(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t n = space_at(s, b, e, true);
    if (!n) break;
    b += n;
  }
  while (e > b) {
    size_t n = space_at(s, b, e, false);
    if (!n) break;
    e -= n;
  }
  return s.substr(b, e - b);
}

std::string identifier_error(const std::string& id, IdKind k, const std::string& name) {
  if (id.empty()) return name + " is empty";
  const size_t max = max_identifier_bytes(k);
  if (id.size() > max) return name + " is " + std::to_string(id.size()) + " bytes, at most " + std::to_string(max);
  if (!csv::valid_utf8(id)) return name + " is not valid UTF-8";
  for (size_t i = 0; i < id.size(); ++i) {
    auto c = static_cast<unsigned char>(id[i]);
    bool c1 = c == 0xC2 && i + 1 < id.size() && static_cast<unsigned char>(id[i + 1]) < 0xA0;  // U+0080..U+009F
    if (c < 0x20 || c == 0x7F || c1) return name + " holds a control character";
  }
  if (all_ascii(id)) return "";  // printable ASCII: nothing invisible, and always NFC
  const std::vector<CodePoint> cps = decode(id);
  for (size_t i = 0; i < cps.size(); ++i)
    if (invisible_char(cps[i].c))
      return name + " holds an invisible character " + code_point_name(cps[i].c) + " at character " +
             std::to_string(i + 1) + " (byte " + std::to_string(cps[i].byte) + ")";
  if (auto br = first_nfc_break(cps)) {
    if (br->first >= cps.size()) return name + " is not in Unicode NFC (" + br->why + ")";
    return name + " is not in Unicode NFC (character " + std::to_string(br->first + 1) + ", byte " +
           std::to_string(cps[br->first].byte) + ", " + br->why + ")";
  }
  return "";
}

bool identifier_text_clean(std::string_view s) {
  if (!csv::valid_utf8(s)) return false;
  if (all_ascii(s)) {
    for (char ch : s)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) return false;
    return true;
  }
  const std::vector<CodePoint> cps = decode(s);
  for (const auto& cp : cps)
    if (refused_char(cp.c)) return false;
  Utf16 u = to_utf16(cps, 0, cps.size());
  UErrorCode err = U_ZERO_ERROR;
  UBool ok = unorm2_isNormalized(nfc(), reinterpret_cast<const UChar*>(u.text.data()),
                                 static_cast<int32_t>(u.text.size()), &err);
  if (U_FAILURE(err)) throw Error(Errc::internal, std::string("ICU: NFC check failed: ") + u_errorName(err));
  return ok;
}

const std::vector<std::pair<char32_t, char32_t>>& refused_code_point_ranges() {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = compute_refused_ranges();
  return ranges;
}

std::string require_identifier(const std::string& raw, IdKind k, const std::string& flag) {
  std::string id = trim_identifier(raw);
  std::string why = identifier_error(id, k, flag);
  if (!why.empty())
    throw Error(Errc::usage, why + " (identifiers are 1 to " + std::to_string(max_identifier_bytes(k)) +
                                 " bytes of UTF-8 in Unicode NFC without control or invisible characters; see IDENTIFIERS in rewardctl(1))");
  return id;
}

}  // namespace rc
