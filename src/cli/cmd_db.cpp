// db migrate | db status
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cstdlib>

#include "cli/context.hpp"
#include "core/embedded.hpp"
#include "core/store/migrate.hpp"

namespace rc::cli {
namespace {

struct {
  bool dry_run = false;
} db_opt;

json status_json(const std::string& where, const std::string& dialect, const store::SchemaStatus& st, bool exists) {
  json applied = json::array();
  for (auto& a : st.applied)
    applied.push_back({{"version", a.version}, {"name", a.name}, {"applied_at", format_utc(a.applied_at)}});
  return {{"database", where},
          {"dialect", dialect},
          {"exists", exists},
          {"current_version", st.current},
          {"latest_version", st.latest},
          {"pending", st.pending},
          {"modified", st.modified},
          {"functions_stale", st.functions_stale},
          {"applied", applied},
          {"state", st.newer() ? "newer" : st.up_to_date() ? "current" : "pending"}};
}

Exit run_status(Ctx& ctx) {
  auto dsn = store::parse_dsn(ctx.settings.db_url, ctx.settings.db_url_source);
  store::SchemaStatus st;
  std::string where;
  bool exists = true;
  struct stat sb;
  if (dsn.dialect == store::Dialect::sqlite && ::stat(dsn.target.c_str(), &sb) != 0) {
    // Report without creating the file: status never writes.
    exists = false;
    where = "sqlite:" + dsn.target;
    for (auto& m : embedded::migrations())
      if (m.dialect == "sqlite") {
        st.pending.push_back(m.name);
        st.latest = std::max(st.latest, m.version);
      }
  } else {
    auto s = ctx.open_store_unchecked(false);
    st = store::schema_status(*s);
    where = s->describe();
  }
  json j = status_json(where, store::dialect_name(dsn.dialect), st, exists);
  // The clock of decisions (core/store/clock_sync.hpp): the database's on PostgreSQL, the host's on
  // SQLite, fixed under REWARDCTL_NOW.
  if (ctx.clock_reading) {
    const auto& r = *ctx.clock_reading;
    j["clock"] = {{"source", "database"},
                  {"host", format_utc(r.host)},
                  {"database", format_utc(r.database)},
                  {"offset_ms", r.offset()},
                  {"round_trip_ms", r.round_trip_ms},
                  {"max_clock_skew_ms", ctx.settings.db_max_clock_skew_ms},
                  {"within_tolerance", std::llabs(r.offset()) <= ctx.settings.db_max_clock_skew_ms}};
  } else {
    j["clock"] = {{"source", dynamic_cast<const ServerClock*>(ctx.clock.get()) ? "host" : "REWARDCTL_NOW"},
                  {"host", format_utc(ctx.now())}};
  }
  j["pooler"] = ctx.settings.db_pooler;
  // db.read_url: the hot standby that read-only commands read from, and how far behind it is
  if (!ctx.settings.db_read_url.empty()) {
    try {
      auto r = ctx.open_read_store();
      const StandbyLag lag = standby_lag(*r);
      j["read_url"] = {{"database", r->describe()}, {"standby", lag.in_recovery},
                       {"replay_lag_ms", lag.replay_lag_ms ? json(*lag.replay_lag_ms) : json(nullptr)},
                       {"replay_paused", lag.replay_paused}};
    } catch (const Error& e) {
      j["read_url"] = {{"error", e.what()}};
      spdlog::warn("db.read_url: {}", e.what());
    }
  } else {
    j["read_url"] = nullptr;
  }
  ctx.out.record(j);
  if (!ctx.out.json_mode()) {
    if (st.newer()) ctx.out.text("the schema is newer than this rewardctl: upgrade rewardctl");
    else if (!st.pending.empty()) ctx.out.text("run `rewardctl db migrate` to apply the pending migrations");
    else if (!st.functions_stale.empty())
      ctx.out.text("run `rewardctl db migrate` to bring the stored functions up to date");
  }
  for (auto& m : st.modified) spdlog::warn("migration {} was changed after it was applied", m);
  return st.up_to_date() ? Exit::ok : Exit::findings;
}

Exit run_migrate(Ctx& ctx) {
  if (db_opt.dry_run) {
    auto dsn = store::parse_dsn(ctx.settings.db_url, ctx.settings.db_url_source);
    struct stat sb;
    std::vector<std::string> pending, functions;
    std::string where = "sqlite:" + dsn.target;
    if (dsn.dialect == store::Dialect::sqlite && ::stat(dsn.target.c_str(), &sb) != 0) {
      for (auto& m : embedded::migrations())
        if (m.dialect == "sqlite") pending.push_back(m.name);
    } else {
      auto s = ctx.open_store_unchecked(false);
      auto st = store::schema_status(*s);
      if (st.newer()) store::require_current_schema(*s);
      pending = st.pending;
      functions = st.functions_stale;
      where = s->describe();
    }
    ctx.out.record({{"database", where}, {"dry_run", true}, {"would_apply", pending}, {"would_run_functions", functions}});
    return Exit::ok;
  }
  auto s = ctx.open_store_unchecked(true);
  std::vector<std::string> functions;
  auto applied = store::migrate(*s, ctx.now(), &functions);
  auto st = store::schema_status(*s);
  for (auto& a : applied) spdlog::info("applied migration {}", a);
  for (auto& f : functions) spdlog::info("ran stored function source {}", f);
  if (applied.empty() && functions.empty()) spdlog::info("schema already current at version {}", st.current);
  ctx.out.record({{"database", s->describe()}, {"applied", applied}, {"functions", functions},
                  {"current_version", st.current}});
  return Exit::ok;
}

}  // namespace

void register_db(CLI::App& app, Ctx& ctx) {
  auto* db = app.add_subcommand("db", "Database schema: migrate, status")->require_subcommand(1);
  auto* migrate = db->add_subcommand("migrate", "Create the database if needed and apply pending migrations");
  migrate->add_flag("--dry-run", db_opt.dry_run, "List the migrations that would be applied; change nothing");
  migrate->callback([&ctx] { ctx.action = [&ctx] { return run_migrate(ctx); }; });
  auto* status = db->add_subcommand("status", "Show the schema version; exit 1 while migrations are pending");
  status->callback([&ctx] { ctx.action = [&ctx] { return run_status(ctx); }; });
}

}  // namespace rc::cli
