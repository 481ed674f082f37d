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

// A stored function's repeatable source (sql/functions/NAME.sql, PostgreSQL only): `db migrate`
// runs it again whenever its checksum differs from the one the database recorded.
struct Function {
  std::string name;  // file name without extension: the function's name
  std::string sql;
};

struct Template {
  std::string kind;  // file name without .toml: direct, lottery, redpack
  std::string text;
};

// All migrations of both dialects, each dialect sorted by version.
const std::vector<Migration>& migrations();
const std::vector<Function>& functions();  // sorted by name
const std::vector<Template>& templates();

}  // namespace rc::embedded
