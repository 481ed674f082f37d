#include "core/store/store.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "core/interrupt.hpp"

namespace rc::store {

const char* dialect_name(Dialect d) { return d == Dialect::sqlite ? "sqlite" : "postgres"; }

bool Row::is_null(size_t i) const { return std::holds_alternative<std::monostate>(cells.at(i)); }

int64_t Row::i64(size_t i) const {
  const Value& v = cells.at(i);
  if (auto p = std::get_if<int64_t>(&v)) return *p;
  if (auto s = std::get_if<std::string>(&v)) {
    size_t pos = 0;
    try {
      int64_t r = std::stoll(*s, &pos);
      if (pos == s->size()) return r;
    } catch (const std::exception&) {
    }
    throw Error(Errc::internal, "column " + std::to_string(i) + " is not an integer: '" + *s + "'");
  }
  throw Error(Errc::internal, "column " + std::to_string(i) + " is NULL where an integer was expected");
}

std::string Row::str(size_t i) const {
  const Value& v = cells.at(i);
  if (auto s = std::get_if<std::string>(&v)) return *s;
  if (auto p = std::get_if<int64_t>(&v)) return std::to_string(*p);
  throw Error(Errc::internal, "column " + std::to_string(i) + " is NULL where text was expected");
}

std::optional<int64_t> Row::opt_i64(size_t i) const {
  if (is_null(i)) return std::nullopt;
  return i64(i);
}

std::optional<std::string> Row::opt_str(size_t i) const {
  if (is_null(i)) return std::nullopt;
  return str(i);
}

std::string Row::str_or(size_t i, const std::string& dflt) const { return is_null(i) ? dflt : str(i); }

Dsn parse_dsn(const std::string& url, const std::string& source) {
  if (url.rfind("sqlite:", 0) == 0) {
    std::string path = url.substr(7);
    if (path.rfind("//", 0) == 0) path = path.substr(2);  // sqlite:///abs/path
    if (path.empty()) throw Error(Errc::config, "empty SQLite path in " + source + ": use sqlite:PATH");
    return {Dialect::sqlite, path};
  }
  if (url.rfind("postgres://", 0) == 0 || url.rfind("postgresql://", 0) == 0) return {Dialect::postgres, url};
  auto colon = url.find("://");
  if (colon != std::string::npos)
    throw Error(Errc::config, "unknown database scheme '" + url.substr(0, colon) + "' in " + source +
                                  ": use sqlite:PATH or postgresql://...");
  if (url.find('=') != std::string::npos) return {Dialect::postgres, url};  // libpq conninfo
  throw Error(Errc::config, "cannot tell the database kind of '" + url + "' in " + source +
                                ": use sqlite:PATH, postgresql://... or a conninfo such as 'host=h dbname=d'");
}

std::unique_ptr<Store> open_store(const Dsn& dsn, const StoreOptions& opts) {
  if (dsn.dialect == Dialect::sqlite) return open_sqlite(dsn.target, opts);
  return open_postgres(dsn.target, opts);
}

Result Store::query(const std::string& sql, const Params& params) {
  for (int attempt = 0;; ++attempt) {
    try {
      return autocommit().query(sql, params);
    } catch (const Retryable& e) {
      before_retry(attempt, e.what());
    }
  }
}

void Store::before_retry(int attempt, const std::string& why) {
  if (cancel_on_signal_) check_interrupted();  // a signal ends the retrying too (exit 130)
  if (severed_) throw Error(Errc::unavailable, "abandoned at the caller's deadline: " + why);
  if (attempt >= max_retries_)
    throw Error(Errc::unavailable, why + " (after " + std::to_string(attempt + 1) + " attempts)");
  ++retries_;
  retry_backoff(attempt + 1);
}

size_t placeholder_count(const std::string& sql) {
  // a character of an identifier (after its first, PostgreSQL also takes digits and '$': a$1 is a name)
  auto ident = [](char c, bool first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9') ||
           (!first && c == '$') || static_cast<unsigned char>(c) >= 0x80;
  };
  auto tag_char = [&](char c, bool first) { return c != '$' && ident(c, first); };
  size_t most = 0;
  const size_t n = sql.size();
  for (size_t i = 0; i < n; ++i) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
      // to the closing quote; E'...' also escapes with backslashes, and stays an E string across a
      // doubled quote and across SQL's continuation (the next literal after whitespace holding a
      // newline): E'a''b\' and E'a'<newline>'b\'' are each one literal
      const bool escapes = c == '\'' && i > 0 && (sql[i - 1] == 'E' || sql[i - 1] == 'e') &&
                           (i < 2 || !ident(sql[i - 2], false));
      for (;;) {
        while (++i < n && sql[i] != c)
          if (escapes && sql[i] == '\\') ++i;
        if (i + 1 < n && sql[i + 1] == c) {  // a doubled quote
          ++i;
          continue;
        }
        // (the gap: spaces, tabs, form feeds, newlines - \n or \r - and -- comments, one newline at least)
        size_t j = i + 1;
        bool newline = false;
        while (c == '\'' && j < n) {
          if (sql[j] == ' ' || sql[j] == '\t' || sql[j] == '\f') ++j;
          else if (sql[j] == '\n' || sql[j] == '\r') newline = true, ++j;
          else if (sql[j] == '-' && j + 1 < n && sql[j + 1] == '-') while (j < n && sql[j] != '\n' && sql[j] != '\r') ++j;
          else break;
        }
        if (!newline || j >= n || sql[j] != '\'') break;
        i = j;  // the continuation
      }
    } else if (c == '-' && i + 1 < n && sql[i + 1] == '-') {  // to the end of the line: \n or \r
      while (i < n && sql[i] != '\n' && sql[i] != '\r') ++i;
    } else if (c == '/' && i + 1 < n && sql[i + 1] == '*') {  // (nested, as PostgreSQL reads them)
      // each /* and */ is two characters of its own: the / of an inner */ starts nothing (/*/**/*/)
      int depth = 0;
      for (; i + 1 < n; ++i) {
        if (sql[i] == '/' && sql[i + 1] == '*') ++depth, ++i;
        else if (sql[i] == '*' && sql[i + 1] == '/') {
          if (--depth == 0) break;
          ++i;
        }
      }
      ++i;
    } else if (c == '$' && i + 1 < n && sql[i + 1] >= '0' && sql[i + 1] <= '9' && (i == 0 || !ident(sql[i - 1], false))) {
      size_t k = 0;
      while (i + 1 < n && sql[i + 1] >= '0' && sql[i + 1] <= '9') k = k * 10 + size_t(sql[++i] - '0');
      most = std::max(most, k);
    } else if (c == '$' && (i == 0 || !ident(sql[i - 1], false))) {  // $tag$ ... $tag$ (the tag may be empty)
      size_t j = i + 1;
      while (j < n && tag_char(sql[j], j == i + 1)) ++j;
      if (j < n && sql[j] == '$') {
        const std::string tag = sql.substr(i, j - i + 1);
        const size_t close = sql.find(tag, j + 1);
        i = close == std::string::npos ? n : close + tag.size() - 1;
      }
    }
  }
  return most;
}

void check_parameter_count(const std::string& sql, size_t takes, size_t given) {
  if (takes == given) return;
  throw Error(Errc::internal, "a statement taking " + std::to_string(takes) + " parameter(s) was given " +
                                  std::to_string(given) + " (a bug in rewardctl): " + sql.substr(0, 200));
}

void retry_backoff(int attempt) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  int cap = std::min(200, 2 << std::min(attempt, 7));  // 4, 8, ... 200 ms
  std::uniform_int_distribution<int> d(1, cap);
  std::this_thread::sleep_for(std::chrono::milliseconds(d(rng)));
}

std::string lock_clause(Dialect d, Lock l, const char* of) {
  if (d != Dialect::postgres) return "";
  std::string out = l == Lock::share ? " FOR SHARE" : " FOR UPDATE";
  if (of) out += std::string(" OF ") + of;
  if (l == Lock::update_skip_locked) out += " SKIP LOCKED";
  return out;
}

}  // namespace rc::store
