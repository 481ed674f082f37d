#include "cli/context.hpp"
#include "cli/time_flag.hpp"

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/delivery/channel.hpp"

#include "core/store/migrate.hpp"
#include "util/csv_reader.hpp"

namespace rc::cli {

store::StoreOptions Ctx::store_options(bool create, bool cancel_on_signal) const {
  store::StoreOptions o;
  o.create_if_missing = create;
  o.cancel_on_signal = cancel_on_signal;
  o.reconnect = cancel_on_signal;  // (both off only for serve's sessions: StoreOptions)
  o.busy_timeout_ms = settings.db_busy_timeout_ms;
  o.retries = settings.db_retries;
  o.pooled = settings.db_pooler == "transaction";
  return o;
}

std::unique_ptr<store::Store> Ctx::open_store_unchecked(bool create, bool cancel_on_signal) {
  auto dsn = store::parse_dsn(settings.db_url, settings.db_url_source);
  auto s = store::open_store(dsn, store_options(create, cancel_on_signal));
  sync_clock(*s);
  return s;
}

void Ctx::sync_clock(store::Store& st) {
  auto* sc = dynamic_cast<ServerClock*>(clock.get());
  if (!sc || clock_reading) return;  // REWARDCTL_NOW fixes the time; or measured already
  clock_reading = store::read_server_clock(st);
  if (!clock_reading) return;  // SQLite: the host's clock is the database's
  sc->set_offset(clock_reading->offset());
  if (std::llabs(clock_reading->offset()) > settings.db_max_clock_skew_ms)
    spdlog::warn("{} (more than db.max_clock_skew_ms = {}): times are taken from the database; fix the host's "
                 "clock (NTP); jobs that end or expire things refuse to run until then",
                 store::describe_skew(*clock_reading), settings.db_max_clock_skew_ms);
}

void Ctx::require_clocks_agree(const std::string& what) const {
  if (!clock_reading || std::llabs(clock_reading->offset()) <= settings.db_max_clock_skew_ms) return;
  throw Error(Errc::config, what + " refused: " + store::describe_skew(*clock_reading) + ", more than " +
                                "db.max_clock_skew_ms = " + std::to_string(settings.db_max_clock_skew_ms) +
                                "; fix the host's clock (NTP) and run again (nothing was changed)");
}

// The file's text; "-" reads standard input. Missing or unreadable: exit 66.
std::string read_input_file(const std::string& path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0)
    throw Error(Errc::input_unreadable, "cannot read " + path + ": " + std::strerror(errno));
  if (S_ISDIR(sb.st_mode)) throw Error(Errc::input_unreadable, "cannot read " + path + ": it is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(Errc::input_unreadable, "cannot read " + path + ": " + std::strerror(errno));
  ss << f.rdbuf();
  if (f.bad()) throw Error(Errc::input_unreadable, "cannot read " + path);
  return ss.str();
}

void confirm_irreversible(bool given, const std::string& what, const std::string& question) {
  if (given) return;
  if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO))
    throw Error(Errc::usage, what + " cannot be undone and there is no terminal to ask on: add --yes to go ahead "
                                    "(nothing changed)");
  std::cerr << printable(question) << " [y/N] " << std::flush;  // names in it may hold escapes
  std::string answer;
  std::getline(std::cin, answer);
  if (answer != "y" && answer != "Y" && answer != "yes") throw Error(Errc::refused, "not confirmed: nothing changed");
}

Millis time_flag(const std::string& v, const std::string& flag, const std::string& example) {
  if (auto t = parse_rfc3339(v)) return *t;
  std::string shown = v;
  if (shown.size() > 64) {
    size_t cut = 60;
    while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    shown = shown.substr(0, cut) + "...";
  }
  throw Error(Errc::usage, flag + " must be an RFC 3339 time with an offset, such as " + example + ", not '" + shown + "'");
}

void check_text(const std::string& v, const std::string& what, size_t max, bool required) {
  if (required && v.empty()) throw Error(Errc::usage, what + " must not be empty");
  if (v.size() > max) throw Error(Errc::usage, what + " is longer than " + std::to_string(max) + " bytes");
  if (!csv::valid_utf8(v)) throw Error(Errc::usage, what + " is not valid UTF-8");
}

// The configured delivery channels: the config's [channels.NAME] tables plus ledger and outbox.
activity::Definition reviewed_definition(const Ctx& ctx, const std::string& text, const std::string& source) {
  auto parsed = activity::review_definition(text, source, lint_context(ctx));
  int errors = 0;
  for (auto& f : parsed.findings) {
    std::string where = source + (f.line ? ":" + std::to_string(f.line) + ":" + std::to_string(f.column) : "");
    std::string line = where + ": " + (f.path.empty() ? "" : f.path + ": ") + f.message + " [" + f.code + "]";
    if (f.severity == activity::Severity::error) {
      ++errors;
      spdlog::error("{}", line);
    } else if (f.severity == activity::Severity::warning) {
      spdlog::warn("{}", line);
    } else {
      spdlog::info("{}", line);
    }
  }
  if (errors || !parsed.def)
    throw Error(Errc::bad_input, source + ": " + std::to_string(errors) +
                                     " lint error(s): nothing was written (see rewardctl activity lint " + source + ")");
  return *parsed.def;
}

activity::LintContext lint_context(const Ctx& ctx) {
  activity::LintContext lc;
  for (auto& [name, cfg] : delivery::parse_channels(ctx.settings)) lc.channels.insert(name);
  return lc;
}

CLI::App* activity_group(CLI::App& app) {
  try {
    return app.get_subcommand("activity");
  } catch (const CLI::OptionNotFound&) {
    return app.add_subcommand("activity", "Activities: define, review, publish, control")->require_subcommand(1);
  }
}

std::unique_ptr<store::Store> Ctx::open_store(bool cancel_on_signal) {
  auto s = open_store_unchecked(false, cancel_on_signal);
  store::require_current_schema(*s);
  return s;
}

StandbyLag standby_lag(store::Store& s) {
  // Caught up (everything received is replayed, and not paused): 0, however long ago the primary
  // last wrote; else how long ago the last replayed transaction committed on the primary.
  auto r = s.autocommit().query(
      "SELECT CASE WHEN pg_is_in_recovery() THEN 1 ELSE 0 END, "
      "CASE WHEN NOT pg_is_in_recovery() THEN NULL "
      "WHEN NOT pg_is_wal_replay_paused() AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
      "ELSE CAST(extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000 AS BIGINT) END, "
      "CASE WHEN pg_is_in_recovery() AND pg_is_wal_replay_paused() THEN 1 ELSE 0 END",
      {});
  return {r[0].i64(0) == 1, r[0].opt_i64(1), r[0].i64(2) == 1};
}

namespace {

// What identifies a database as a copy of another: the cluster's system identifier (the same on
// a standby as on its primary; unreadable without the privilege: left empty), the database and
// schema names, and when the schema's first migration was applied (a copy has the same row).
std::vector<std::string> identity(store::Store& s) {
  std::string system;
  try {
    system = s.autocommit().query("SELECT CAST(system_identifier AS TEXT) FROM pg_control_system()", {})[0].str(0);
  } catch (const Error&) {
  }
  auto r = s.autocommit().query(
      "SELECT current_database(), current_schema(), "
      "(SELECT CAST(min(applied_at) AS TEXT) FROM schema_migrations)", {});
  return {system, r[0].str_or(0, ""), r[0].str_or(1, ""), r[0].str_or(2, "")};
}

}  // namespace

std::unique_ptr<store::Store> Ctx::open_read_store() {
  if (settings.db_read_url.empty()) return open_store();
  const auto primary = store::parse_dsn(settings.db_url, settings.db_url_source);
  const auto dsn = store::parse_dsn(settings.db_read_url, settings.db_read_url_source);
  if (primary.dialect != store::Dialect::postgres || dsn.dialect != store::Dialect::postgres)
    throw Error(Errc::config, settings.db_read_url_source + ": db.read_url names a PostgreSQL hot standby of db.url, "
                                  "which must be PostgreSQL too (" + settings.db_url_source + " gives " +
                                  (primary.dialect == store::Dialect::postgres ? "PostgreSQL" : "SQLite") + ")");
  auto s = store::open_store(dsn, store_options());
  sync_clock(*s);  // (a command that also opens the primary, reconcile, has read its clock first)
  store::require_current_schema(*s);
  // A standby of another cluster, database or schema would answer for other books (a reconcile of
  // them "clean"): it must be a copy of db.url's
  {
    auto primary_store = store::open_store(primary, store_options());
    const auto a = identity(*primary_store), b = identity(*s);
    static const char* what[] = {"cluster (system identifier)", "database", "schema", "first migration time"};
    for (size_t i = 0; i < a.size(); ++i)
      if (!(i == 0 && (a[i].empty() || b[i].empty())) && a[i] != b[i])
        throw Error(Errc::config, settings.db_read_url_source + ": db.read_url is not a copy of db.url (" +
                                      settings.db_url_source + "): its " + what[i] + " is '" + b[i] + "', not '" +
                                      a[i] + "'; name a standby of that database, with the same search_path");
  }
  const StandbyLag lag = standby_lag(*s);
  if (lag.replay_paused)
    spdlog::warn("{}: replay is paused on the standby: what it shows stops at the moment it was paused",
                 settings.db_read_url_source);
  if (!lag.in_recovery)
    spdlog::warn("{}: db.read_url is not a standby (it accepts writes): reading from it anyway", settings.db_read_url_source);
  else
    spdlog::info("reading from the standby ({}){}", s->describe(),
                 lag.replay_lag_ms ? ", last replayed transaction " + std::to_string(*lag.replay_lag_ms) + " ms ago"
                                   : std::string(": nothing replayed yet"));
  return s;
}

}  // namespace rc::cli
