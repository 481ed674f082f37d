#pragma once
// The row rules of a whitelist file, shared by import-qualifications and qualification revoke: the
// header, what makes a row valid, and how a rejected row is written back for the operator to fix.
// The --max-rejects budget is in reject_limit.hpp, the rejects file in rejects_writer.hpp, the
// opened input in input.hpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "util/csv_reader.hpp"

namespace rc::jobs::import {

struct Header {
  std::vector<std::string> names;  // as in the file, trimmed
  size_t user_col = 0;
  std::vector<size_t> ext_cols;    // kept in the qualification's ext (all but user_id, expires_at, _line, _error)
  std::optional<size_t> expires_col;  // an expires_at column: the row's own expiry (import-qualifications)
  int64_t line = 1;
};

// Reads the header record. Throws Error(data) naming FILE:LINE when the input is empty, the header is
// malformed, a column name is empty, invalid UTF-8 or given twice, or there is no user_id column.
// Columns named _line and _error (those of a rejects file being imported again) are ignored.
Header read_header(csv::Reader& reader);

// Checks one data record. Returns "" and sets user_id (trimmed) and ext (a JSON object of the
// other columns as strings, "" when there are none) when the row is valid; otherwise the reason,
// worded for the rejects file ("user_id is empty", "3 fields, the header has 2").
std::string check_row(const Header& h, const csv::Record& rec, std::string& user_id, std::string& ext);

// The row's expires_at cell (REQUIRES: check_row accepted the row). Returns "" and sets `at` (nullopt
// when the file has no expires_at column or the cell is empty), or the reason for the rejects file:
// not RFC 3339 with an offset, or not after `now`.
std::string row_expiry(const Header& h, const csv::Record& rec, Millis now, std::optional<Millis>& at);

// Reason a user id is invalid, or "": the identifier rules of core/identifier.hpp, named "user_id".
std::string check_user_id(const std::string& id);
// trim_identifier (core/identifier.hpp).
std::string trim_user_id(const std::string& s);

// The record as rejects-file text (no line end): the header's columns, missing ones empty and extra
// ones dropped, or for a malformed record its raw text in the first column.
std::string reject_text(const Header& h, const csv::Record& rec);

}  // namespace rc::jobs::import
