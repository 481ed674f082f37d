#include "jobs/import_rows.hpp"

#include <string.h>

#include <nlohmann/json.hpp>
#include <string_view>

#include "core/error.hpp"

namespace rc::jobs::import {

namespace {

bool ignored_column(const std::string& n) { return n == "_line" || n == "_error"; }

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

std::string trim_user_id(const std::string& s) {
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

std::string check_user_id(const std::string& id) {
  if (id.empty()) return "user_id is empty";
  if (id.size() > kMaxUserIdBytes)
    return "user_id is " + std::to_string(id.size()) + " bytes, at most " + std::to_string(kMaxUserIdBytes);
  if (!csv::valid_utf8(id)) return "user_id is not valid UTF-8";
  for (size_t i = 0; i < id.size(); ++i) {
    auto c = static_cast<unsigned char>(id[i]);
    bool c1 = c == 0xC2 && i + 1 < id.size() && static_cast<unsigned char>(id[i + 1]) < 0xA0;  // U+0080..U+009F
    if (c < 0x20 || c == 0x7F || c1) return "user_id holds a control character";
  }
  return "";
}

Header read_header(csv::Reader& reader) {
  csv::Record rec;
  if (!reader.next(rec))
    throw Error(Exit::data, reader.where(1) + ": the file is empty: expected a header row naming a user_id column");
  Header h;
  h.line = rec.line;
  auto fail = [&](const std::string& why) { throw Error(Exit::data, reader.where(rec.line) + ": header: " + why); };
  if (!rec.error.empty()) fail(rec.error);
  if (rec.fields.size() < rec.field_count) fail("too many columns");
  bool found = false;
  for (size_t i = 0; i < rec.fields.size(); ++i) {
    std::string n = trim_user_id(rec.fields[i]);
    if (n.empty()) fail("column " + std::to_string(i + 1) + " has no name");
    if (!csv::valid_utf8(n) || memchr(n.data(), 0, n.size())) fail("column " + std::to_string(i + 1) + " is not valid UTF-8 text");
    for (auto& prev : h.names)
      if (prev == n) fail("column '" + n + "' is named twice");
    if (n == "user_id") {
      h.user_col = i;
      found = true;
    } else if (!ignored_column(n)) {
      h.ext_cols.push_back(i);
    }
    h.names.push_back(n);
  }
  if (!found) fail("no user_id column (the columns are: " + csv::join_fields(h.names) + ")");
  return h;
}

std::string check_row(const Header& h, const csv::Record& rec, std::string& user_id, std::string& ext) {
  if (!rec.error.empty()) return rec.error;
  if (rec.field_count != h.names.size())
    return std::to_string(rec.field_count) + (rec.field_count == 1 ? " field" : " fields") + ", the header has " +
           std::to_string(h.names.size()) + (rec.field_count > h.names.size() ? " (extra columns)" : " (missing columns)");
  for (size_t i = 0; i < rec.fields.size(); ++i) {
    const std::string& f = rec.fields[i];
    const std::string what = i == h.user_col ? std::string("user_id") : "field '" + h.names[i] + "'";
    if (memchr(f.data(), 0, f.size())) return what + " holds a NUL byte";
    if (!csv::valid_utf8(f)) return what + " is not valid UTF-8";
  }
  user_id = trim_user_id(rec.fields[h.user_col]);
  std::string why = check_user_id(user_id);
  if (!why.empty()) return why;
  ext.clear();
  if (!h.ext_cols.empty()) {
    // In column order; every field was checked to be valid UTF-8 above, so dump() cannot throw.
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (size_t c : h.ext_cols) j[h.names[c]] = rec.fields[c];
    ext = j.dump();
  }
  return "";
}

std::string reject_text(const Header& h, const csv::Record& rec) {
  std::string out;
  bool first = true;
  for (size_t i = 0; i < h.names.size(); ++i) {
    if (ignored_column(h.names[i])) continue;
    if (!first) out += ',';
    first = false;
    if (!rec.error.empty()) {
      if (i == 0) csv::append_field(out, rec.raw);
      continue;
    }
    if (i < rec.fields.size()) csv::append_field(out, rec.fields[i]);
  }
  return out;
}

}  // namespace rc::jobs::import
