#pragma once
// Files embedded into the binary at build time (see cmake/embed.cmake).
#include <string>
#include <vector>

namespace rc::embedded {

struct Migration {
  std::string dialect;  // "sqlite" or "postgres"
  int version;          // from the NNNN_ prefix of the file name
  std::string name;     // file name without extension
  std::string sql;
};

struct Template {
  std::string kind;  // file name without .toml: direct, lottery, redpack
  std::string text;
};

// All migrations of both dialects, each dialect sorted by version.
const std::vector<Migration>& migrations();
const std::vector<Template>& templates();

}  // namespace rc::embedded
