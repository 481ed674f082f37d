#pragma once
// The file of rejected rows an import or revoke writes for the operator to fix and feed back.
#include <cstdint>
#include <cstdio>
#include <string>

namespace rc::jobs::import {

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

}  // namespace rc::jobs::import
