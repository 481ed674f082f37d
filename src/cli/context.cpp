#include "cli/context.hpp"

#include <CLI/CLI.hpp>

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

CLI::App* activity_group(CLI::App& app) {
  try {
    return app.get_subcommand("activity");
  } catch (const CLI::OptionNotFound&) {
    return app.add_subcommand("activity", "Activities: define, review, publish, control")->require_subcommand(1);
  }
}

std::unique_ptr<store::Store> Ctx::open_store() {
  auto s = open_store_unchecked(false);
  store::require_current_schema(*s);
  return s;
}

}  // namespace rc::cli
