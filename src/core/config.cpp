#include "core/config.hpp"

#include <libpq-fe.h>
#include <pwd.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/error.hpp"
#include "core/identifier.hpp"

namespace rc {

namespace {

std::string where(const std::string& path, const toml::node& n) {
  const auto& b = n.source().begin;
  return path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column);
}

[[noreturn]] void bad(const std::string& path, const toml::node& n, const std::string& msg) {
  throw Error(Errc::config, where(path, n) + ": " + msg);
}

void check_keys(const std::string& path, const toml::table& t, const std::string& prefix,
                const std::set<std::string>& allowed) {
  for (auto&& [k, v] : t) {
    (void)v;
    if (!allowed.count(std::string(k.str()))) {
      const auto& b = k.source().begin;
      throw Error(Errc::config, path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
                                    ": unknown setting '" + prefix + std::string(k.str()) + "'");
    }
  }
}

std::string get_str(const std::string& path, const toml::table& t, const char* key, const std::string& name,
                    std::string dflt) {
  auto* n = t.get(key);
  if (!n) return dflt;
  auto v = n->value<std::string>();
  if (!n->is_string() || !v) bad(path, *n, "'" + name + "' must be a string");
  return *v;
}

bool get_bool(const std::string& path, const toml::table& t, const char* key, const std::string& name, bool dflt) {
  auto* n = t.get(key);
  if (!n) return dflt;
  if (!n->is_boolean()) bad(path, *n, "'" + name + "' must be true or false");
  return *n->value<bool>();
}

int get_int(const std::string& path, const toml::table& t, const char* key, const std::string& name, int dflt,
            int lo, int hi) {
  auto* n = t.get(key);
  if (!n) return dflt;
  if (!n->is_integer()) bad(path, *n, "'" + name + "' must be an integer");
  int64_t v = *n->value<int64_t>();
  if (v < lo || v > hi)
    bad(path, *n, "'" + name + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return int(v);
}

// The keys each section accepts. [channels.NAME] tables are checked by delivery::parse_channels.
// [jobs] holds the job runner's pause switch (jobs.paused, jobs.stop_file), read by the job commands.
const std::map<std::string, std::set<std::string>>& sections() {
  static const std::map<std::string, std::set<std::string>> t = {
      {"db", {"url", "read_url", "busy_timeout_ms", "retries", "pooler", "max_clock_skew_ms", "lease_ttl_ms"}},
      {"output", {"format", "color"}},
      {"log", {"level", "file", "format"}},
      {"review", {"required", "distinct_approvers", "drill_required"}},
      {"import", {}},
      {"jobs", {"paused", "stop_file"}},
      // read by `serve` (cli/cmd_serve.cpp, docs/serve.md)
      {"serve", {"listen", "threads", "connections", "tokens", "user_rate", "user_burst", "locale", "max_body_bytes", "read_timeout_ms",
                 "write_timeout_ms", "keep_alive_timeout_ms", "keep_alive_max_requests", "drain_timeout_ms", "queue_timeout_ms", "request_timeout_ms",
                 "db_busy_timeout_ms", "db_retries"}},
  };
  return t;
}

// "sqlite:data/r.db" in /etc/rewardctl/rewardctl.toml -> "sqlite:/etc/rewardctl/data/r.db".
std::string resolve_sqlite_path(const std::string& url, const std::string& config_path) {
  if (url.rfind("sqlite:", 0) != 0) return url;
  std::string p = url.substr(7);
  if (p.rfind("//", 0) == 0) p = p.substr(2);
  if (p.empty() || p[0] == '/' || p == ":memory:") return url;
  std::string dir = ".";
  if (auto slash = config_path.rfind('/'); slash != std::string::npos) dir = slash == 0 ? "/" : config_path.substr(0, slash);
  char buf[PATH_MAX];
  if (::realpath(dir.c_str(), buf)) dir = buf;
  return "sqlite:" + dir + (dir.back() == '/' ? "" : "/") + p;
}

bool parse_bool_env(const std::string& name, const std::string& v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  throw Error(Errc::config, name + " must be true or false, not '" + v + "'");
}

void check_choice(const std::string& what, const std::string& v, const std::set<std::string>& ok) {
  if (ok.count(v)) return;
  std::string list;
  for (auto& o : ok) list += (list.empty() ? "" : "|") + o;
  throw Error(Errc::config, what + " must be one of " + list + ", not '" + v + "'");
}

}  // namespace

bool dsn_has_password(const std::string& dsn) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (!opts) {
    // not parseable by libpq: opening it will fail with libpq's own message; look no further
    if (err) PQfreemem(err);
    return false;
  }
  bool found = false;
  for (auto* o = opts; o->keyword; ++o)
    if (std::string(o->keyword) == "password" && o->val && *o->val) found = true;
  PQconninfoFree(opts);
  return found;
}

std::string login_name(const GetEnv& getenv) {
  if (const char* u = getenv("USER"); u && *u) return u;
  if (const char* l = getlogin(); l && *l) return l;
  if (auto* pw = getpwuid(geteuid()); pw && pw->pw_name) return pw->pw_name;
  return "uid" + std::to_string(geteuid());
}

std::string resolve_secret(const std::string& ref, const std::string& what, const GetEnv& getenv) {
  if (ref.rfind("env:", 0) == 0) {
    std::string name = ref.substr(4);
    const char* v = getenv(name.c_str());
    if (!v || !*v) throw Error(Errc::config, what + " refers to environment variable " + name + ", which is not set");
    return v;
  }
  if (ref.rfind("file:", 0) == 0) {
    std::ifstream f(ref.substr(5));
    if (!f) throw Error(Errc::config, what + " refers to file " + ref.substr(5) + ", which cannot be read");
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  throw Error(Errc::config, what + " must be a reference such as env:NAME or file:PATH, not a literal secret");
}

Settings load_settings(const Overrides& flags, const GetEnv& getenv) {
  Settings s;
  auto env = [&](const char* n) -> std::optional<std::string> {
    const char* v = getenv(n);
    if (v && *v) return std::string(v);
    return std::nullopt;
  };

  // 1. the file: --config, then REWARDCTL_CONFIG, then ./rewardctl.toml when present
  std::string path;
  bool explicit_path = true;
  if (flags.config) path = *flags.config;
  else if (auto e = env("REWARDCTL_CONFIG")) path = *e;
  else {
    path = "rewardctl.toml";
    explicit_path = false;
  }
  std::ifstream probe(path);
  if (!probe) {
    if (explicit_path) throw Error(Errc::config, "config file " + path + " cannot be read");
  } else {
    probe.close();
    try {
      s.file = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
      const auto& b = e.source().begin;
      throw Error(Errc::config, path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " +
                                    std::string(e.description()));
    }
    s.config_path = path;
    const auto& t = s.file;
    std::set<std::string> top{"channels", "alerts"};  // checked by parse_channels and jobs/runtime/alert.cpp
    for (auto& [sec, keys] : sections()) top.insert(sec);
    check_keys(path, t, "", top);
    for (auto& sec : top) {
      if (auto* n = t.get(sec); n && !n->is_table()) bad(path, *n, "'" + sec + "' must be a table");
    }
    for (auto& [sec, keys] : sections())
      if (auto* tab = t[sec].as_table()) check_keys(path, *tab, sec + ".", keys);
    if (auto* db = t["db"].as_table()) {
      if (auto* u = db->get("url")) {
        std::string url = get_str(path, *db, "url", "db.url", "");
        if (url.rfind("env:", 0) == 0 || url.rfind("file:", 0) == 0) url = resolve_secret(url, "db.url", getenv);
        else if (url.rfind("sqlite:", 0) != 0 && dsn_has_password(url))
          bad(path, *u, "db.url holds a password: use env:NAME, a PGPASSFILE/.pgpass or PGSERVICE instead");
        s.db_url = resolve_sqlite_path(url, path);
        s.db_url_source = where(path, *u);
      }
      if (auto* u = db->get("read_url")) {
        std::string url = get_str(path, *db, "read_url", "db.read_url", "");
        if (url.rfind("env:", 0) == 0 || url.rfind("file:", 0) == 0) url = resolve_secret(url, "db.read_url", getenv);
        else if (dsn_has_password(url))
          bad(path, *u, "db.read_url holds a password: use env:NAME, a PGPASSFILE/.pgpass or PGSERVICE instead");
        if (url.rfind("sqlite:", 0) == 0)
          bad(path, *u, "db.read_url must name a PostgreSQL hot standby, not a SQLite file");
        s.db_read_url = url;
        s.db_read_url_source = where(path, *u);
      }
      s.db_busy_timeout_ms = get_int(path, *db, "busy_timeout_ms", "db.busy_timeout_ms", s.db_busy_timeout_ms, 0,
                                     600000);
      s.db_retries = get_int(path, *db, "retries", "db.retries", s.db_retries, 0, 100);
      if (auto* p = db->get("pooler")) {
        s.db_pooler = get_str(path, *db, "pooler", "db.pooler", s.db_pooler);
        s.db_pooler_source = where(path, *p);
        if (s.db_pooler != "none" && s.db_pooler != "transaction")
          bad(path, *p, "'db.pooler' must be \"none\" or \"transaction\", not '" + s.db_pooler + "'");
      }
      s.db_max_clock_skew_ms =
          get_int(path, *db, "max_clock_skew_ms", "db.max_clock_skew_ms", s.db_max_clock_skew_ms, 0, 86400000);
      s.db_lease_ttl_ms = get_int(path, *db, "lease_ttl_ms", "db.lease_ttl_ms", s.db_lease_ttl_ms, 1000, 3600000);
    }
    if (auto* o = t["output"].as_table()) {
      s.output = get_str(path, *o, "format", "output.format", s.output);
      s.color = get_str(path, *o, "color", "output.color", s.color);
    }
    if (auto* l = t["log"].as_table()) {
      s.log_level = get_str(path, *l, "level", "log.level", s.log_level);
      s.log_file = get_str(path, *l, "file", "log.file", s.log_file);
      s.log_format = get_str(path, *l, "format", "log.format", s.log_format);
    }
    if (auto* r = t["review"].as_table()) {
      s.review_required = get_bool(path, *r, "required", "review.required", s.review_required);
      s.review_distinct_approvers =
          get_bool(path, *r, "distinct_approvers", "review.distinct_approvers", s.review_distinct_approvers);
      s.review_drill_required = get_bool(path, *r, "drill_required", "review.drill_required", s.review_drill_required);
    }
  }

  // 2. environment
  if (auto e = env("REWARDCTL_DB")) { s.db_url = *e; s.db_url_source = "REWARDCTL_DB"; }
  if (auto e = env("REWARDCTL_DB_READ_URL")) { s.db_read_url = *e; s.db_read_url_source = "REWARDCTL_DB_READ_URL"; }
  if (auto e = env("REWARDCTL_DB_POOLER")) { s.db_pooler = *e; s.db_pooler_source = "REWARDCTL_DB_POOLER"; }
  if (auto e = env("REWARDCTL_OUTPUT")) s.output = *e;
  if (auto e = env("REWARDCTL_LOG_LEVEL")) s.log_level = *e;
  if (auto e = env("REWARDCTL_LOG_FILE")) s.log_file = *e;
  if (auto e = env("REWARDCTL_LOG_FORMAT")) s.log_format = *e;
  if (auto e = env("REWARDCTL_COLOR")) s.color = *e;
  if (auto e = env("REWARDCTL_OPERATOR")) s.operator_name = *e;
  if (auto e = env("REWARDCTL_REVIEW_REQUIRED")) s.review_required = parse_bool_env("REWARDCTL_REVIEW_REQUIRED", *e);
  if (auto e = env("REWARDCTL_REVIEW_DISTINCT_APPROVERS"))
    s.review_distinct_approvers = parse_bool_env("REWARDCTL_REVIEW_DISTINCT_APPROVERS", *e);
  if (auto e = env("REWARDCTL_REVIEW_DRILL_REQUIRED"))
    s.review_drill_required = parse_bool_env("REWARDCTL_REVIEW_DRILL_REQUIRED", *e);

  if (s.db_pooler != "none" && s.db_pooler != "transaction")
    throw Error(Errc::config, s.db_pooler_source + ": db.pooler must be \"none\" or \"transaction\", not '" +
                                  s.db_pooler + "'");

  // 3. flags
  if (flags.db) { s.db_url = *flags.db; s.db_url_source = "--db"; }
  if (flags.output) s.output = *flags.output;
  if (flags.log_level) s.log_level = *flags.log_level;
  if (flags.log_file) s.log_file = *flags.log_file;
  if (flags.log_format) s.log_format = *flags.log_format;
  if (flags.color) s.color = *flags.color;
  if (flags.operator_name) s.operator_name = *flags.operator_name;
  s.quiet = flags.quiet;
  // https://no-color.org: any non-empty NO_COLOR means no colour unless asked for explicitly
  // (always); auto - the default, or given as a flag - looks at it as well as at the terminal
  if (s.color == "auto" && env("NO_COLOR")) s.color = "never";

  // the operator is recorded on every change (status log, audit): the identifier rules of a user id,
  // so a name neither backend can store, or one holding a terminal escape, is refused up front when
  // it was given; a login name that breaks them (USER is anyone's to set) becomes "uid<N>" instead,
  // so that reading commands keep working in an odd environment
  s.operator_name = trim_identifier(s.operator_name);
  if (!s.operator_name.empty()) {
    std::string why = identifier_error(s.operator_name, IdKind::user, "the operator name");
    if (!why.empty()) throw Error(Errc::usage, why + " (from --operator or REWARDCTL_OPERATOR)");
  } else {
    s.operator_name = trim_identifier(login_name(getenv));
    if (!identifier_error(s.operator_name, IdKind::user, "login").empty())
      s.operator_name = "uid" + std::to_string(geteuid());
  }
  check_choice("output format", s.output, {"table", "json"});
  check_choice("log level", s.log_level, {"trace", "debug", "info", "warn", "error", "off"});
  check_choice("log format", s.log_format, {"text", "json"});
  check_choice("color", s.color, {"auto", "always", "never"});
  return s;
}

}  // namespace rc
