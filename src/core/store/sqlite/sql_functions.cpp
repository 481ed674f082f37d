#include "core/store/sqlite/sql_functions.hpp"

#include <sqlite3.h>

#include <string>
#include <string_view>

#include "base/error.hpp"
#include "core/clock.hpp"
#include "core/identifier.hpp"

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

// rc_identifier_clean(text): see sql_functions.hpp. A blob is read as its bytes.
void identifier_clean_fn(sqlite3_context* ctx, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return sqlite3_result_null(ctx);
  const auto* p = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  const int n = sqlite3_value_bytes(argv[0]);
  try {
    sqlite3_result_int(ctx, identifier_text_clean(std::string_view(p ? p : "", static_cast<size_t>(n))) ? 1 : 0);
  } catch (const std::exception& e) {
    sqlite3_result_error(ctx, e.what(), -1);
  }
}

void add(sqlite3* db, const char* name, int args, void (*fn)(sqlite3_context*, int, sqlite3_value**)) {
  const int rc = sqlite3_create_function_v2(db, name, args, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                            nullptr, fn, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK)
    throw Error(Errc::internal, std::string("SQLite: cannot register ") + name + ": " + sqlite3_errstr(rc));
}

}  // namespace

void register_sql_functions(sqlite3* db) {
  add(db, "rc_period_key", 3, &period_key_fn);
  add(db, "rc_identifier_clean", 1, &identifier_clean_fn);
}

}  // namespace rc::store
