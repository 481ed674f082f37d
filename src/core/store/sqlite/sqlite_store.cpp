// SQLite implementation of the Store: one connection, WAL, a busy timeout, BEGIN IMMEDIATE for
// writes (busy_timeout does not protect a deferred transaction that reads before it writes), and a
// per-connection cache of prepared statements.
#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <unistd.h>

#include <chrono>
#include <mutex>
#include <cstdio>
#include <thread>
#include <unordered_map>

#include "core/interrupt.hpp"
#include "core/store/fault.hpp"
#include "core/store/sqlite/sql_functions.hpp"
#include "core/store/store.hpp"

namespace rc::store {
namespace {

// $1 -> ?1 outside string literals, so one SQL text serves both dialects.
std::string to_sqlite_placeholders(const std::string& sql) {
  std::string out;
  out.reserve(sql.size());
  bool in_str = false;
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (c == '\'') in_str = !in_str;
    if (!in_str && c == '$' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9') {
      out += '?';
      continue;
    }
    out += c;
  }
  return out;
}

bool is_busy(int code) { return (code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED; }

// "owner 1000, mode 644" of a file, for messages about permissions.
std::string owner_and_mode(const std::string& path) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) return "cannot stat it";
  char buf[64];
  std::snprintf(buf, sizeof buf, "owner uid %u, mode %03o", unsigned(sb.st_uid), unsigned(sb.st_mode & 0777));
  return buf;
}

// Every SQLite exception becomes the project's error through the one classification in
// store/fault.hpp.
[[noreturn]] void rethrow(const SQLite::Exception& e, const std::string& sql, const std::string& path) {
  const Fault f = classify_sqlite(e.getExtendedErrorCode(), interrupted());
  std::string msg = std::string("SQLite: ") + e.what();
  switch (f) {
    case Fault::retry: msg = std::string("database is busy: ") + e.what(); break;
    case Fault::no_perm:
      msg = "database sqlite:" + path + " is read-only for this user (" + owner_and_mode(path) + "): " + e.what() +
            "; run as the file's owner, or give this user write access to the file and its directory";
      break;
    case Fault::interrupted:
      msg = "interrupted: the statement in progress was stopped and its transaction rolled back; rerun to continue";
      break;
    case Fault::bug: msg += " in: " + sql.substr(0, 200); break;
    default: msg += " (sqlite:" + path + ")"; break;
  }
  throw_fault(f, msg);
}

class SqliteSession : public Tx {
 public:
  SqliteSession(SQLite::Database& db, std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>>& c,
                const std::string& path)
      : db_(db), cache_(c), path_(path) {}
  Dialect dialect() const override { return Dialect::sqlite; }

  Result query(const std::string& sql, const Params& params) override {
    SQLite::Statement* st = nullptr;
    try {
      auto it = cache_.find(sql);
      if (it == cache_.end()) {
        auto p = std::make_unique<SQLite::Statement>(db_, to_sqlite_placeholders(sql));
        st = p.get();
        cache_.emplace(sql, std::move(p));
      } else {
        st = it->second.get();
      }
      check_parameter_count(sql, size_t(st->getBindParameterCount()), params.size());
      st->tryReset();
      st->clearBindings();
      for (size_t i = 0; i < params.size(); ++i) {
        const Value& v = params[i];
        int idx = int(i) + 1;
        if (auto p = std::get_if<int64_t>(&v)) st->bind(idx, static_cast<int64_t>(*p));
        else if (auto s = std::get_if<std::string>(&v)) st->bind(idx, *s);
        else st->bind(idx);
      }
      Result r;
      const int changes_before = sqlite3_total_changes(db_.getHandle());
      int ncol = st->getColumnCount();
      for (int c = 0; c < ncol; ++c) r.columns.emplace_back(st->getColumnName(c));
      while (st->executeStep()) {
        Row row;
        row.cells.reserve(ncol);
        for (int c = 0; c < ncol; ++c) {
          SQLite::Column col = st->getColumn(c);
          if (col.isNull()) row.cells.emplace_back(std::monostate{});
          else if (col.isInteger()) row.cells.emplace_back(int64_t(col.getInt64()));
          else row.cells.emplace_back(col.getString());
        }
        r.rows.push_back(std::move(row));
      }
      r.affected = sqlite3_total_changes(db_.getHandle()) - changes_before;
      st->tryReset();
      return r;
    } catch (const SQLite::Exception& e) {
      if (st) st->tryReset();
      rethrow(e, sql, path_);
    }
  }

  void exec_script(const std::string& sql) override {
    try {
      db_.exec(sql);
    } catch (const SQLite::Exception& e) {
      rethrow(e, sql, path_);
    }
  }

 private:
  SQLite::Database& db_;
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>>& cache_;
  const std::string& path_;
};

// Process-wide SQLite settings, set once before the library initialises (sqlite3_config refuses
// them afterwards; then SQLite's defaults stay, which are correct, only slower).
// Allocation statistics are off: nothing reads them, and keeping them takes a global mutex on every
// allocation, shared by every connection of the process.
// The statement-journal spill threshold stays SQLite's (64 KiB): raised (8 MiB, 256 KiB), it made
// SQLite 3.40 answer SQLITE_FULL ("database or disk is full") once a journal did spill - a
// 1M-grant INSERT ... SELECT, a 5,000-user list-issue - with the disk half empty.
void configure_sqlite_once() {
  static std::once_flag once;
  std::call_once(once, [] { (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
}

class SqliteStore : public Store {
 public:
  SqliteStore(const std::string& path, const StoreOptions& o) : Store(o.retries, o.cancel_on_signal), path_(path), opts_(o) {
    struct stat sb;
    bool exists = ::stat(path.c_str(), &sb) == 0;
    if (!exists && !o.create_if_missing)
      throw Error(Errc::config, "database sqlite:" + path + " does not exist: run `rewardctl db migrate` to create it");
    auto slash = path.rfind('/');
    if (!exists && slash != std::string::npos && slash > 0) {
      std::string dir = path.substr(0, slash);
      if (::stat(dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode))
        throw Error(Errc::unavailable,
                    "cannot create database sqlite:" + path + ": directory " + dir + " does not exist");
    }
    // Another owner's file (or mode 444): read-only commands read it, writing ones get exit 77.
    if (exists && ::access(path.c_str(), W_OK) != 0) {
      open_read_only();
      return;
    }
    configure_sqlite_once();
    try {
      int flags = SQLite::OPEN_READWRITE | (o.create_if_missing ? SQLite::OPEN_CREATE : 0);
      db_ = std::make_unique<SQLite::Database>(path, flags, o.busy_timeout_ms);
      // Reading the schema fails here, not later, when the file is not a database.
      db_->exec("PRAGMA foreign_keys=ON");
      // Switching a new file to WAL needs an exclusive lock and may answer SQLITE_BUSY without
      // waiting (another process is creating the same file): retry it within the busy timeout.
      for (int attempt = 0;; ++attempt) {
        try {
          std::string mode = db_->execAndGet("PRAGMA journal_mode").getString();
          if (mode != "wal") db_->exec("PRAGMA journal_mode=WAL");
          break;
        } catch (const SQLite::Exception& e) {
          if (!is_busy(e.getErrorCode()) || attempt * 20 >= o.busy_timeout_ms) throw;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
      db_->exec("PRAGMA synchronous=FULL");  // money: a commit survives power loss
    } catch (const SQLite::Exception& e) {
      if (is_busy(e.getErrorCode()))
        throw Error(Errc::busy, "database sqlite:" + path + " is locked by another process: try again");
      throw Error(Errc::unavailable, "cannot open database sqlite:" + path + ": " + e.what());
    }
    register_sql_functions(db_->getHandle());
    on_interrupt();
  }
  ~SqliteStore() override {
    remove_interrupt_action(interrupt_action_);
    auto_.reset();
    cache_.clear();
  }

  Dialect dialect() const override { return Dialect::sqlite; }
  std::string describe() const override { return "sqlite:" + path_; }

  void transact(TxMode mode, const std::function<void(Tx&)>& fn) override {
    for (int attempt = 0;; ++attempt) {
      SqliteSession s(*db_, cache_, path_);
      bool open = false;
      std::string why;
      try {
        db_->exec(mode == TxMode::write ? "BEGIN IMMEDIATE" : "BEGIN");
        open = true;
        run_fence(mode, s);
        fn(s);
        db_->exec(s.rollback_requested() ? "ROLLBACK" : "COMMIT");
        return;
      } catch (const SQLite::Exception& e) {
        if (open) rollback();
        if (!is_busy(e.getErrorCode())) rethrow(e, "BEGIN/COMMIT", path_);
        why = std::string("database is busy: ") + e.what();
      } catch (const Retryable& e) {
        if (open) rollback();
        why = e.what();
      } catch (...) {
        if (open) rollback();
        throw;
      }
      before_retry(attempt, why);
    }
  }

  Session& autocommit() override {
    if (!auto_) auto_ = std::make_unique<SqliteSession>(*db_, cache_, path_);
    return *auto_;
  }

  std::unique_ptr<BulkWriter> bulk_writer(Tx& tx, const std::string& table,
                                          const std::vector<std::string>& columns) override;

 private:
  // SIGINT/SIGTERM stop the statement in progress (sqlite3_interrupt is safe from another thread)
  // and a wait for another process's lock (SQLite's own busy handler only watches the clock).
  void on_interrupt() {
    if (cancel_on_signal_) cancel_changed(true);
    sqlite3_busy_handler(db_->getHandle(), &SqliteStore::on_busy, this);
  }
  void sever() override {
    severed_ = true;
    sqlite3_interrupt(db_->getHandle());  // safe from another thread; a lock wait ends in on_busy
  }
  // (remove_interrupt_action waits for an interrupt under way: the actions run under its lock)
  void cancel_changed(bool on) override {
    if (!on) {
      remove_interrupt_action(interrupt_action_);
      interrupt_action_ = 0;
    } else if (!interrupt_action_) {
      sqlite3* h = db_->getHandle();
      interrupt_action_ = add_interrupt_action([h] { sqlite3_interrupt(h); });
    }
  }

  // Waits for a lock up to the busy timeout in steps of at most 20 ms; 0 = give up (SQLITE_BUSY).
  static int on_busy(void* self, int count) {
    auto* s = static_cast<SqliteStore*>(self);
    if (s->severed_) return 0;
    auto now = std::chrono::steady_clock::now();
    if (count == 0) s->busy_since_ = now;
    if (s->cancel_on_signal_ && interrupted()) return 0;
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - s->busy_since_).count();
    if (waited >= s->opts_.busy_timeout_ms) return 0;
    int step = count < 4 ? 1 << count : 20;  // 1, 2, 4, 8, then 20 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(step, s->opts_.busy_timeout_ms - waited)));
    return 1;
  }

  // Opens a file this user may not write. A WAL database is read through its -shm file, which
  // exists while the owner has the database open; when nobody has it open, the -shm is gone and
  // this user cannot create it (the directory is not its own). With no WAL content left to replay
  // the file itself then holds every commit, and it is read as immutable.
  void open_read_only() {
    if (::access(path_.c_str(), R_OK) != 0)
      throw Error(Errc::not_permitted, "cannot read database sqlite:" + path_ + " (" + owner_and_mode(path_) +
                                           "): run as its owner, or give this user read access");
    auto probe = [this] { db_->execAndGet("SELECT count(*) FROM sqlite_master"); };
    try {
      db_ = std::make_unique<SQLite::Database>(path_, SQLite::OPEN_READONLY, opts_.busy_timeout_ms);
      try {
        probe();
      } catch (const SQLite::Exception& e) {
        const int code = e.getErrorCode();
        struct stat wal;
        const bool wal_pending = ::stat((path_ + "-wal").c_str(), &wal) == 0 && wal.st_size > 0;
        if ((code != SQLITE_READONLY && code != SQLITE_CANTOPEN) || wal_pending) throw;
        db_.reset();
        db_ = std::make_unique<SQLite::Database>(uri_of(path_) + "?immutable=1", SQLite::OPEN_READONLY | SQLite::OPEN_URI,
                                                 opts_.busy_timeout_ms);
        probe();
      }
      db_->exec("PRAGMA foreign_keys=ON");
    } catch (const SQLite::Exception& e) {
      if (is_busy(e.getErrorCode()))
        throw Error(Errc::busy, "database sqlite:" + path_ + " is locked by another process: try again");
      throw Error(Errc::unavailable, "cannot open the read-only database sqlite:" + path_ + " (" +
                                         owner_and_mode(path_) + "): " + e.what());
    }
    register_sql_functions(db_->getHandle());
    on_interrupt();
  }

  // file:PATH with the characters a URI gives meaning to escaped.
  static std::string uri_of(const std::string& path) {
    std::string out = "file:";
    for (unsigned char c : path) {
      if (c == '?' || c == '#' || c == '%' || c < 0x20 || c >= 0x7f) {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%%%02X", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
    return out;
  }

  void rollback() {
    try {
      if (!db_->getHandle() || sqlite3_get_autocommit(db_->getHandle())) return;
      db_->exec("ROLLBACK");
    } catch (...) {
    }
  }
  std::string path_;
  StoreOptions opts_;
  std::unique_ptr<SQLite::Database> db_;
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> cache_;
  std::unique_ptr<SqliteSession> auto_;
  int interrupt_action_ = 0;
  std::chrono::steady_clock::time_point busy_since_;
};

class SqliteBulk : public BulkWriter {
 public:
  SqliteBulk(Tx& tx, std::string sql, size_t ncol) : tx_(tx), sql_(std::move(sql)), ncol_(ncol) {}
  void write_row(const std::vector<std::optional<std::string>>& row) override {
    Params p;
    p.reserve(ncol_);
    for (auto& c : row) p.push_back(c ? Value(*c) : kNull);
    tx_.query(sql_, p);
  }
  void finish() override {}

 private:
  Tx& tx_;
  std::string sql_;
  size_t ncol_;
};

std::unique_ptr<BulkWriter> SqliteStore::bulk_writer(Tx& tx, const std::string& table,
                                                     const std::vector<std::string>& columns) {
  std::string sql = "INSERT INTO " + table + " (";
  std::string vals;
  for (size_t i = 0; i < columns.size(); ++i) {
    sql += (i ? "," : "") + columns[i];
    vals += (i ? ",$" : "$") + std::to_string(i + 1);
  }
  sql += ") VALUES (" + vals + ")";
  return std::make_unique<SqliteBulk>(tx, sql, columns.size());
}

}  // namespace

std::unique_ptr<Store> open_sqlite(const std::string& path, const StoreOptions& opts) {
  return std::make_unique<SqliteStore>(path, opts);
}

}  // namespace rc::store
