#include "core/identifier.hpp"

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
  return "";
}

std::string require_identifier(const std::string& raw, IdKind k, const std::string& flag) {
  std::string id = trim_identifier(raw);
  std::string why = identifier_error(id, k, flag);
  if (!why.empty())
    throw Error(Errc::usage, why + " (identifiers are 1 to " + std::to_string(max_identifier_bytes(k)) +
                                 " bytes of UTF-8 without control characters; see IDENTIFIERS in rewardctl(1))");
  return id;
}

}  // namespace rc
