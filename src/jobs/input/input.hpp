#pragma once
// The whitelist file an import or revoke reads.
#include <cstdint>
#include <memory>
#include <string>

#include "util/csv_reader.hpp"

namespace rc::jobs::import {

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

}  // namespace rc::jobs::import
