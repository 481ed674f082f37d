#pragma once
// Settings layered as flags > REWARDCTL_* environment > rewardctl.toml > defaults.
#include <functional>
#include <optional>
#include <string>

#include <toml++/toml.h>

namespace rc {

struct Overrides {  // what the command line said; empty = not given
  std::optional<std::string> config, db, output, log_level, log_file, log_format, color, operator_name;
  bool quiet = false;
};

struct Settings {
  std::string config_path;             // the file that was read, empty when none
  std::string db_url = "sqlite:rewardctl.db";
  std::string db_url_source = "default";  // flag, env, file or default: named in error messages
  int db_busy_timeout_ms = 5000;
  int db_retries = 8;
  // [db] pooler: "none" (a direct connection, or a pooler in session mode) or "transaction" (a
  // pooler such as PgBouncer in transaction mode: no session state, store/store.hpp StoreOptions)
  std::string db_pooler = "none";
  std::string db_pooler_source = "default";
  // [db] read_url: a hot standby of the database (PostgreSQL) that read-only commands read from -
  // report, record show, ledger, reconcile's checks (its run is recorded on db.url); empty: db.url
  std::string db_read_url;
  std::string db_read_url_source = "default";
  int db_max_clock_skew_ms = 2000;  // [db] max_clock_skew_ms: host vs database clock (core/clock.hpp)
  int db_lease_ttl_ms = 30000;      // [db] lease_ttl_ms: a row lease's life between heartbeats
  std::string output = "table";        // table | json
  std::string log_level = "info";      // trace debug info warn error off
  std::string log_file;
  std::string log_format = "text";    // text | json (one object per line)
  std::string color = "auto";          // auto | always | never; NO_COLOR turns auto into never
  std::string operator_name;           // recorded on every mutating action
  bool quiet = false;
  bool review_required = true;
  bool review_distinct_approvers = true;
  bool review_drill_required = false;  // activity publish needs a passing drill of the current definition
  toml::table file;                    // the whole file, for sections such as [channels.NAME]
};

using GetEnv = std::function<const char*(const char*)>;

// Layers the settings. Throws Error(config) naming file:line:column for a malformed file, an unknown
// key in any section, a wrong type or a literal secret. A relative sqlite: path in the file is
// resolved against the file's directory (as kubeconfig does), so cron's working directory does not
// decide which database is used.
Settings load_settings(const Overrides& flags, const GetEnv& getenv);

// Resolves a secret reference: "env:NAME" or "file:PATH". `what` names the setting in errors.
// Literal secrets are refused (Error config): secrets never live in the config file itself.
std::string resolve_secret(const std::string& ref, const std::string& what, const GetEnv& getenv);

// True when a PostgreSQL URI or conninfo string carries a password, as libpq itself parses it
// (PQconninfoParse): "password = x" with spaces and "postgresql://u:x@h" are both found.
bool dsn_has_password(const std::string& dsn);

// The login name of the person running the command (for --operator's default).
std::string login_name(const GetEnv& getenv);

}  // namespace rc
