#include "core/store/sqlite/sql_functions.hpp"

#include <sqlite3.h>

#include <string>

#include "core/clock.hpp"

namespace rc::store {
namespace {

void period_key_fn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  for (int i = 0; i < 3; ++i)
    if (sqlite3_value_type(argv[i]) == SQLITE_NULL) return sqlite3_result_null(ctx);
  const auto* kind = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const auto* zone = reinterpret_cast<const char*>(sqlite3_value_text(argv[2]));
  auto p = parse_period(kind ? kind : "");
  if (!p || !zone) return sqlite3_result_null(ctx);
  try {
    const std::string key = period_key(*p, sqlite3_value_int64(argv[1]), zone);
    sqlite3_result_text(ctx, key.c_str(), int(key.size()), SQLITE_TRANSIENT);
  } catch (...) {  // an unknown zone
    sqlite3_result_null(ctx);
  }
}

}  // namespace

void register_sql_functions(sqlite3* db) {
  sqlite3_create_function_v2(db, "rc_period_key", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr, &period_key_fn,
                             nullptr, nullptr, nullptr);
}

}  // namespace rc::store
