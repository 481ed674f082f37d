#include "cli/context.hpp"

#include "core/store/migrate.hpp"

namespace rc::cli {

std::unique_ptr<store::Store> Ctx::open_store_unchecked(bool create) {
  auto dsn = store::parse_dsn(settings.db_url, settings.db_url_source);
  store::StoreOptions o;
  o.create_if_missing = create;
  o.busy_timeout_ms = settings.db_busy_timeout_ms;
  o.retries = settings.db_retries;
  return store::open_store(dsn, o);
}

std::unique_ptr<store::Store> Ctx::open_store() {
  auto s = open_store_unchecked(false);
  store::require_current_schema(*s);
  return s;
}

}  // namespace rc::cli
