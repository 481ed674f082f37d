#include "core/config.hpp"

#include <pwd.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/error.hpp"

namespace rc {

namespace {

std::string where(const std::string& path, const toml::node& n) {
  const auto& b = n.source().begin;
  return path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column);
}

[[noreturn]] void bad(const std::string& path, const toml::node& n, const std::string& msg) {
  throw Error(Exit::config, where(path, n) + ": " + msg);
}

void check_keys(const std::string& path, const toml::table& t, const std::string& prefix,
                const std::set<std::string>& allowed) {
  for (auto&& [k, v] : t) {
    (void)v;
    if (!allowed.count(std::string(k.str()))) {
      const auto& b = k.source().begin;
      throw Error(Exit::config, path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) +
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

bool has_literal_password(const std::string& url) {
  if (url.find("password=") != std::string::npos) return true;
  auto scheme = url.find("://");
  if (scheme == std::string::npos) return false;
  auto at = url.find('@', scheme + 3);
  if (at == std::string::npos) return false;
  return url.substr(scheme + 3, at - scheme - 3).find(':') != std::string::npos;
}

bool parse_bool_env(const std::string& name, const std::string& v) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  throw Error(Exit::config, name + " must be true or false, not '" + v + "'");
}

void check_choice(const std::string& what, const std::string& v, const std::set<std::string>& ok) {
  if (ok.count(v)) return;
  std::string list;
  for (auto& o : ok) list += (list.empty() ? "" : "|") + o;
  throw Error(Exit::config, what + " must be one of " + list + ", not '" + v + "'");
}

}  // namespace

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
    if (!v || !*v) throw Error(Exit::config, what + " refers to environment variable " + name + ", which is not set");
    return v;
  }
  if (ref.rfind("file:", 0) == 0) {
    std::ifstream f(ref.substr(5));
    if (!f) throw Error(Exit::config, what + " refers to file " + ref.substr(5) + ", which cannot be read");
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  throw Error(Exit::config, what + " must be a reference such as env:NAME or file:PATH, not a literal secret");
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
    if (explicit_path) throw Error(Exit::config, "config file " + path + " cannot be read");
  } else {
    probe.close();
    try {
      s.file = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
      const auto& b = e.source().begin;
      throw Error(Exit::config, path + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " +
                                    std::string(e.description()));
    }
    s.config_path = path;
    const auto& t = s.file;
    check_keys(path, t, "", {"db", "output", "log", "review", "channels", "import", "jobs", "alerts"});
    for (const char* sec : {"db", "output", "log", "review", "channels", "import", "jobs", "alerts"}) {
      if (auto* n = t.get(sec); n && !n->is_table()) bad(path, *n, std::string("'") + sec + "' must be a table");
    }
    if (auto* db = t["db"].as_table()) {
      check_keys(path, *db, "db.", {"url", "busy_timeout_ms", "retries"});
      if (auto* u = db->get("url")) {
        std::string url = get_str(path, *db, "url", "db.url", "");
        if (url.rfind("env:", 0) == 0 || url.rfind("file:", 0) == 0) url = resolve_secret(url, "db.url", getenv);
        else if (has_literal_password(url))
          bad(path, *u, "db.url holds a password: use env:NAME, a PGPASSFILE/.pgpass or PGSERVICE instead");
        s.db_url = url;
        s.db_url_source = where(path, *u);
      }
      s.db_busy_timeout_ms = get_int(path, *db, "busy_timeout_ms", "db.busy_timeout_ms", s.db_busy_timeout_ms, 0,
                                     600000);
      s.db_retries = get_int(path, *db, "retries", "db.retries", s.db_retries, 0, 100);
    }
    if (auto* o = t["output"].as_table()) {
      check_keys(path, *o, "output.", {"format"});
      s.output = get_str(path, *o, "format", "output.format", s.output);
    }
    if (auto* l = t["log"].as_table()) {
      check_keys(path, *l, "log.", {"level", "file"});
      s.log_level = get_str(path, *l, "level", "log.level", s.log_level);
      s.log_file = get_str(path, *l, "file", "log.file", s.log_file);
    }
    if (auto* r = t["review"].as_table()) {
      check_keys(path, *r, "review.", {"required", "distinct_approvers"});
      s.review_required = get_bool(path, *r, "required", "review.required", s.review_required);
      s.review_distinct_approvers =
          get_bool(path, *r, "distinct_approvers", "review.distinct_approvers", s.review_distinct_approvers);
    }
  }

  // 2. environment
  if (auto e = env("REWARDCTL_DB")) { s.db_url = *e; s.db_url_source = "REWARDCTL_DB"; }
  if (auto e = env("REWARDCTL_OUTPUT")) s.output = *e;
  if (auto e = env("REWARDCTL_LOG_LEVEL")) s.log_level = *e;
  if (auto e = env("REWARDCTL_LOG_FILE")) s.log_file = *e;
  if (auto e = env("REWARDCTL_OPERATOR")) s.operator_name = *e;
  if (auto e = env("REWARDCTL_REVIEW_REQUIRED")) s.review_required = parse_bool_env("REWARDCTL_REVIEW_REQUIRED", *e);
  if (auto e = env("REWARDCTL_REVIEW_DISTINCT_APPROVERS"))
    s.review_distinct_approvers = parse_bool_env("REWARDCTL_REVIEW_DISTINCT_APPROVERS", *e);

  // 3. flags
  if (flags.db) { s.db_url = *flags.db; s.db_url_source = "--db"; }
  if (flags.output) s.output = *flags.output;
  if (flags.log_level) s.log_level = *flags.log_level;
  if (flags.log_file) s.log_file = *flags.log_file;
  if (flags.operator_name) s.operator_name = *flags.operator_name;
  s.quiet = flags.quiet;

  if (s.operator_name.empty()) s.operator_name = login_name(getenv);
  check_choice("output format", s.output, {"table", "json"});
  check_choice("log level", s.log_level, {"trace", "debug", "info", "warn", "error", "off"});
  return s;
}

}  // namespace rc
