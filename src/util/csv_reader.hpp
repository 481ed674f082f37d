#pragma once
// Streaming RFC 4180 CSV on libcsv, for files of any size: memory is bounded by the largest record,
// never by the file. Every record carries the physical line it starts on (a quoted field may hold
// newlines, so record number and line number differ), because operators fix files by line number.
//
// Accepted: UTF-8 with or without a byte-order mark, LF or CRLF line ends, quoted fields holding
// commas, doubled quotes and newlines, blank lines (skipped). Spaces and tabs around an unquoted
// field are not part of it (quote the value to keep them).
//
// Two kinds of trouble:
//  - a malformed record (a quote inside an unquoted field, text after a closing quote) is returned
//    with `error` set and the reader resynchronises at the next physical line: one bad row never
//    costs the rest of the file;
//  - a structural problem (a quoted field still open at the end of the input, a field over the size
//    limit — usually an unterminated quote swallowing the file — or a read error) throws
//    csv::StructuralError naming the input and line.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

struct csv_parser;

namespace rc::csv {

// Bad input data: Errc::bad_input.
class StructuralError : public Error {
 public:
  StructuralError(const std::string& msg, int64_t line) : Error(Errc::bad_input, msg), line_(line) {}
  int64_t line() const { return line_; }

 private:
  int64_t line_;
};

struct Limits {
  size_t max_field_bytes = 1 << 20;  // one field; more is treated as an unterminated quote
  size_t max_fields = 4096;          // fields kept per record; more are counted, not stored
  size_t max_record_bytes = 8 << 20; // one record, all fields together
};

struct Record {
  std::vector<std::string> fields;  // the first min(field_count, max_fields) fields
  size_t field_count = 0;           // how many fields the record had
  int64_t line = 0;                 // physical line (1-based) where the record starts
  int64_t end_line = 0;             // physical line where it ends
  std::string error;                // malformed record: what is wrong (fields are then partial)
  std::string raw;                  // malformed record only: its physical text, for the rejects file
};

class Reader {
 public:
  // Reads from fd (not owned); `name` appears in messages ("-" is shown as "standard input").
  Reader(int fd, std::string name, Limits limits = {});
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Fills r with the next record; false at the end of the input.
  // Throws StructuralError (see above).
  bool next(Record& r);

  // Bytes consumed from the input so far (for progress against the file size).
  uint64_t bytes_read() const { return bytes_read_; }
  // The physical line the reader has reached.
  int64_t line() const { return line_; }
  const std::string& name() const { return name_; }
  // true when the input can be read again from its start (a regular file).
  bool rewindable() const;
  // Starts over from where the input stood when the reader was made. REQUIRES: rewindable().
  void rewind();
  // Offset of the input when the reader was made (0 unless a caller had read from fd before).
  uint64_t start_offset() const { return start_; }
  // Called with every block of bytes read from the input, before parsing (e.g. to hash the file).
  void set_tap(std::function<void(const char*, size_t)> tap) { tap_ = std::move(tap); }

  // "NAME:LINE" as used in every message.
  std::string where(int64_t line) const;

 private:
  friend struct ReaderCallbacks;
  bool fill();
  void feed(const char* p, size_t n, bool line_end);
  void malformed(bool line_end);
  void reset_parser();
  void end_record();

  int fd_;
  uint64_t start_ = 0;
  std::string name_;
  Limits limits_;
  csv_parser* parser_;
  std::function<void(const char*, size_t)> tap_;

  std::vector<char> buf_;
  size_t pos_ = 0, len_ = 0;
  bool eof_ = false, finished_ = false, at_start_ = true, skip_to_eol_ = false;
  uint64_t bytes_read_ = 0;
  int64_t line_ = 1;           // physical line being fed
  int64_t record_start_ = 1;   // line where the record in progress started
  std::string cur_raw_;        // physical text of the record in progress (for malformed records)

  // records completed by the parser and not yet returned (a line holds at most a few); slots and
  // their strings are recycled, so a steady stream of records allocates nothing
  std::vector<Record> ready_;
  size_t ready_n_ = 0, ready_pos_ = 0;
  Record cur_;
  size_t cur_nfields_ = 0;
  size_t cur_bytes_ = 0;
  bool too_big_ = false;
  size_t long_field_ = 0;  // 1-based number of a field over the limit, 0 when none  // set in a callback (which must not throw through libcsv's C frames)
};

// Appends one CSV field to out, quoted when it holds a comma, quote, CR, LF or leading/trailing
// space (RFC 4180; quotes doubled).
void append_field(std::string& out, std::string_view field);
// One CSV line (no line end) of the given fields.
std::string join_fields(const std::vector<std::string>& fields);

// true when s is well-formed UTF-8 (no overlongs, surrogates or code points over U+10FFFF).
bool valid_utf8(std::string_view s);

}  // namespace rc::csv
