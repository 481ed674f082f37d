#pragma once
// The row rules of a whitelist file, shared by import-qualifications and qualification revoke: the
// header, what makes a row valid, how a rejected row is written back for the operator to fix, and
// the --max-rejects budget.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/csv_reader.hpp"
#include "core/store/store.hpp"

namespace rc::jobs::import {

constexpr size_t kMaxUserIdBytes = 64;

struct Header {
  std::vector<std::string> names;  // as in the file, trimmed
  size_t user_col = 0;
  std::vector<size_t> ext_cols;    // kept in the qualification's ext (all but user_id, _line, _error)
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

// Reason a user id is invalid, or "" (after trimming: present, at most 64 bytes, printable UTF-8).
std::string check_user_id(const std::string& id);
// Strips ASCII white space and the Unicode spaces exports add (U+00A0, U+3000, U+FEFF).
std::string trim_user_id(const std::string& s);

// The record as rejects-file text (no line end): the header's columns, missing ones empty and extra
// ones dropped, or for a malformed record its raw text in the first column.
std::string reject_text(const Header& h, const csv::Record& rec);

// --max-rejects N or N%: how many rejected rows an import may have and still commit.
struct RejectLimit {
  int64_t count = 0;
  double percent = -1;  // >= 0 when given as a percentage of the rows read
  // Throws Error(usage) for anything but a non-negative integer or a percentage 0..100.
  static RejectLimit parse(const std::string& s);
  bool over(int64_t rejected, int64_t read) const;
  std::string text() const;
};

// The rejects file: the original header plus _line and _error, one row per rejected record in the
// order they are found. Created on the first reject (an import with none leaves no file). Batched
// runs record its length with each commit so that a rerun can cut off what an uncommitted batch
// wrote (truncate_to).
class RejectsWriter {
 public:
  RejectsWriter(std::string path, std::string header_text, bool enabled);
  ~RejectsWriter();
  void add(int64_t line, const std::string& text, const std::string& error);
  // Flushes; returns the file's length (0 while nothing was written).
  uint64_t flush();
  // Cuts the file back to `length` bytes (as returned by flush). 0 removes it.
  void truncate_to(uint64_t length);
  // Continues a file of which the first `length` bytes were committed by an earlier run.
  // Returns false when the file is shorter than that (it was removed or edited).
  bool resume(uint64_t length);
  // Removes a rejects file left by an earlier run when this run rejected nothing.
  void remove_stale();
  int64_t written() const { return written_; }
  const std::string& path() const { return path_; }
  bool enabled() const { return enabled_; }

 private:
  void open();
  std::string path_, header_;
  bool enabled_;
  std::FILE* f_ = nullptr;
  int64_t written_ = 0;
};

// A Bloom filter of user ids: "certainly new" for nearly every row of a file, so that only the rare
// "maybe seen" ones need an exact duplicate check in the database. Memory is fixed at construction
// (1 to 32 MiB), whatever the file size; false positives only cost an extra check.
class Bloom {
 public:
  explicit Bloom(uint64_t expected_items);
  ~Bloom();
  Bloom(const Bloom&) = delete;
  Bloom& operator=(const Bloom&) = delete;
  // Adds key; returns true when it may have been added before.
  bool test_and_add(const std::string& key);
  uint64_t bytes() const { return (mask_ + 1) / 8; }

 private:
  uint64_t* bits_;
  uint64_t mask_;
};

// An opened whitelist file ("-" = standard input) and its reader.
struct Input {
  std::string file;
  int fd = -1;
  bool owned = false;
  uint64_t size = 0;  // bytes; 0 when unknown (a pipe)
  std::unique_ptr<csv::Reader> reader;
  Input() = default;
  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;
  ~Input();
};
// Throws Error(no_input) when the file is missing, a directory or unreadable.
std::unique_ptr<Input> open_input(const std::string& file);
// FILE.rejects.csv, or stdin.rejects.csv in the working directory for standard input.
std::string default_rejects_path(const std::string& file);
// The activity's id. Throws Error(usage) naming the code when there is none.
int64_t find_activity(store::Store& s, const std::string& code);

// Incremental SHA-256 (the file checksum recorded with an import and used to find a run to resume).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const char* p, size_t n);
  std::string hex();  // the digest of everything since construction or reset()
  void reset();

 private:
  void* ctx_;
};
// The SHA-256 of a regular file from offset `from` to its end, read by offset (the descriptor's position is kept).
// Throws Error(no_input).
std::string sha256_fd(int fd, uint64_t from, const std::string& name);

}  // namespace rc::jobs::import
