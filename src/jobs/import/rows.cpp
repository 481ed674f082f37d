#include "jobs/import/rows.hpp"

#include <string.h>

#include <nlohmann/json.hpp>
#include <string_view>

#include "base/error.hpp"
#include "core/identifier.hpp"

namespace rc::jobs::import {

namespace {

bool ignored_column(const std::string& n) { return n == "_line" || n == "_error"; }

}  // namespace

std::string trim_user_id(const std::string& s) { return trim_identifier(s); }

std::string check_user_id(const std::string& id) { return identifier_error(id, IdKind::user, "user_id"); }

Header read_header(csv::Reader& reader) {
  csv::Record rec;
  if (!reader.next(rec))
    throw Error(Errc::bad_input, reader.where(1) + ": the file is empty: expected a header row naming a user_id column");
  Header h;
  h.line = rec.line;
  auto fail = [&](const std::string& why) { throw Error(Errc::bad_input, reader.where(rec.line) + ": header: " + why); };
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
    } else if (n == "expires_at") {
      h.expires_col = i;
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

std::string row_expiry(const Header& h, const csv::Record& rec, Millis now, std::optional<Millis>& at) {
  at.reset();
  if (!h.expires_col) return "";
  const std::string v = trim_identifier(rec.fields[*h.expires_col]);
  if (v.empty()) return "";
  at = parse_rfc3339(v);
  if (!at)
    return "expires_at '" + (v.size() <= 64 ? v : v.substr(0, 60) + "...") +
           "' is not an RFC 3339 time with an offset (2026-12-31T23:59:59+08:00)";
  if (*at <= now) return "expires_at " + v + " is not in the future";
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
