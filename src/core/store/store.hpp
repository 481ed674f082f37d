#pragma once
// The storage interface. The core writes portable SQL with $1, $2 ... placeholders and bound
// parameters only; each implementation prepares statements once per connection and maps its
// engine's errors to the project's error classes. What the dialects spell differently is asked of
// the session (Session::lock_rows), never chosen at a call site; Session::dialect() remains for the
// rare statement that only one engine has.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/error.hpp"

namespace rc::store {

enum class Dialect { sqlite, postgres };
const char* dialect_name(Dialect d);

// A row lock a SELECT asks for (Session::lock_rows).
enum class Lock {
  update,              // FOR UPDATE: the rows are this transaction's until it ends
  update_skip_locked,  // FOR UPDATE SKIP LOCKED: rows another transaction holds are left out
  share,               // FOR SHARE: a concurrent update of the rows waits for this transaction
};
// The clause for lock `l` in dialect `d` (Session::lock_rows, Store::lock_rows).
std::string lock_clause(Dialect d, Lock l, const char* of = nullptr);

using Value = std::variant<std::monostate, int64_t, std::string>;
using Params = std::vector<Value>;
inline const Value kNull{};
// A bound parameter from an optional: empty -> NULL.
template <class T>
Value opt(const std::optional<T>& v) {
  if (!v) return kNull;
  return Value(*v);
}

class Row {
 public:
  std::vector<Value> cells;
  bool is_null(size_t i) const;
  int64_t i64(size_t i) const;               // REQUIRES: not null and an integer (PostgreSQL text is parsed)
  std::string str(size_t i) const;           // integers are formatted; REQUIRES: not null
  std::optional<int64_t> opt_i64(size_t i) const;
  std::optional<std::string> opt_str(size_t i) const;
  std::string str_or(size_t i, const std::string& dflt) const;
};

struct Result {
  std::vector<std::string> columns;
  std::vector<Row> rows;
  int64_t affected = 0;  // rows changed by INSERT/UPDATE/DELETE
  bool empty() const { return rows.empty(); }
  size_t size() const { return rows.size(); }
  const Row& operator[](size_t i) const { return rows[i]; }
};

// A unique-key conflict. Thrown so that callers can tell "a concurrent twin won" from a failure.
class UniqueViolation : public Error {
 public:
  explicit UniqueViolation(const std::string& m) : Error(Errc::internal, m) {}
};
// Busy, serialization failure or deadlock: the transaction is retried by Store::transact.
class Retryable : public Error {
 public:
  explicit Retryable(const std::string& m) : Error(Errc::unavailable, m) {}
};

class Session {
 public:
  virtual ~Session() = default;
  virtual Dialect dialect() const = 0;
  // Runs one statement with bound parameters and returns its rows (if any) and affected count.
  virtual Result query(const std::string& sql, const Params& params = {}) = 0;
  // Runs one statement and returns the number of rows it changed.
  int64_t exec(const std::string& sql, const Params& params = {}) { return query(sql, params).affected; }
  // Runs several ;-separated statements without parameters (migrations).
  virtual void exec_script(const std::string& sql) = 0;
  // The clause that ends a SELECT taking row lock `l` (on the rows of table alias `of`, when the
  // statement joins): " FOR UPDATE [OF of] [SKIP LOCKED]" or " FOR SHARE [OF of]" on PostgreSQL;
  // "" on SQLite, where the write transaction holds the whole database from BEGIN IMMEDIATE, so
  // that every row it reads is as good as locked (and no other writer can skip to another row).
  std::string lock_rows(Lock l, const char* of = nullptr) const { return lock_clause(dialect(), l, of); }
};

class Tx : public Session {
 public:
  // The transaction rolls back instead of committing when the callback returns.
  void rollback_only() { rollback_ = true; }
  bool rollback_requested() const { return rollback_; }

 protected:
  bool rollback_ = false;
};

enum class TxMode {
  read,   // a consistent read
  write,  // SQLite: BEGIN IMMEDIATE (the write lock is taken at BEGIN); PostgreSQL: READ COMMITTED
};

// Bulk loader (PostgreSQL COPY, SQLite one prepared insert) into a table inside a transaction.
class BulkWriter {
 public:
  virtual ~BulkWriter() = default;
  virtual void write_row(const std::vector<std::optional<std::string>>& row) = 0;
  virtual void finish() = 0;
};

class Store {
 public:
  virtual ~Store() = default;
  virtual Dialect dialect() const = 0;
  // As Session::lock_rows, for a statement run by query() below.
  std::string lock_rows(Lock l, const char* of = nullptr) const { return lock_clause(dialect(), l, of); }
  // Where this store points, without any password: "sqlite:/path/x.db", "postgresql host=h db=d".
  virtual std::string describe() const = 0;
  // Runs fn in one transaction and commits unless fn called rollback_only() or threw. A busy,
  // serialization or deadlock failure reruns fn from the start (so fn must have no effects outside
  // the transaction) up to the configured number of retries, then throws Error(unavailable).
  virtual void transact(TxMode mode, const std::function<void(Tx&)>& fn) = 0;
  // One statement outside an explicit transaction (autocommit), retried like a transaction.
  Result query(const std::string& sql, const Params& params = {});
  // A session whose every statement runs on its own (autocommit): for single reads that must not
  // pay for BEGIN/COMMIT. Not retried.
  virtual Session& autocommit() = 0;
  int64_t exec(const std::string& sql, const Params& params = {}) { return query(sql, params).affected; }
  // Bulk loading into `table` (columns given) inside tx. PostgreSQL streams COPY FROM STDIN.
  // REQUIRES: the writer is finished or destroyed before the transact() callback returns or throws
  // (it refers to the transaction); keep it in a scope inside the callback.
  virtual std::unique_ptr<BulkWriter> bulk_writer(Tx& tx, const std::string& table,
                                                   const std::vector<std::string>& columns) = 0;
  // How many times transact() or query() retried since the store was opened (for logs and tests).
  int64_t retries_used() const { return retries_; }
  // The i-th (0-based) companion of this store: another connection to the same database, with the
  // same options, opened on first use and kept (warm) until this store is destroyed, for work that
  // runs beside this store's on another thread (reconcile's checks, reading one exported
  // snapshot); each companion is used by one thread at a time. nullptr where another connection
  // would not run anything beside this one (SQLite). Throws like open_store when the database
  // cannot be reached. Not thread-safe itself: called from the thread that owns this store.
  virtual Store* companion(size_t) { return nullptr; }
  // Whether SIGINT/SIGTERM stop this store's work (on from open): they cancel the statement in
  // progress (PostgreSQL: libpq's cancel request; SQLite: sqlite3_interrupt; core/interrupt.hpp),
  // end a wait for another process's lock, and end retrying. Off for the bookkeeping a command does
  // once its work has stopped on a signal (recording the run, releasing its lease): a cancel sent for
  // the work's last statement can arrive after that statement ended, and must not stop the record
  // instead. Turning it off returns once no cancel of this store is under way (one that reaches an
  // idle session is dropped: by the PostgreSQL server; by SQLite, with no statement running). While
  // off, a record waiting for a lock still ends at the store's lock timeout. See SignalsSpare.
  void cancel_on_signal(bool on) {
    cancel_on_signal_ = on;
    cancel_changed(on);
  }
  // A check that every write transaction of this store (and of its companions, present and
  // future) runs first, inside the transaction: the fence of a job's lease (jobs/runtime/lease.hpp),
  // which throws when the lease is gone, so that the transaction rolls back before it commits
  // anything. nullptr removes it. Called from the thread that owns the store, between transactions.
  using Fence = std::function<void(Tx&)>;
  virtual void set_fence(std::shared_ptr<const Fence> f) { fence_ = std::move(f); }
  // Ends this store's work from another thread, for a caller whose deadline passed (serve): the
  // statement in progress fails at once as unavailable, whatever the server does - PostgreSQL: the
  // connection's socket is shut down, which also ends a wait on a server that stopped answering (a
  // cancel request would need that server); SQLite: sqlite3_interrupt and the end of any lock wait
  // - and no retry follows. Afterwards the store is unusable: discard it. Thread-safe; REQUIRES: the
  // store outlives the call.
  virtual void sever() { severed_ = true; }
  // True when the connection to the server is gone (PostgreSQL: terminated, shut down, cut): the
  // store must be opened again. SQLite: never.
  virtual bool connection_lost() const { return false; }
  bool severed() const { return severed_; }

 protected:
  // cancel_on_signal: StoreOptions::cancel_on_signal; a backend registers its interrupt action at
  // open when it is on.
  explicit Store(int max_retries, bool cancel_on_signal = true)
      : cancel_on_signal_(cancel_on_signal), max_retries_(max_retries) {}
  // Called before sleeping for retry `attempt` (0-based) after `why`; throws Error(unavailable)
  // once the configured number of retries is used up.
  void before_retry(int attempt, const std::string& why);
  // Registers (on) or removes (off) the store's interrupt action; off waits for one under way.
  virtual void cancel_changed(bool) {}
  // Runs the fence (set_fence) in a write transaction that has just begun.
  void run_fence(TxMode mode, Tx& tx) const {
    if (mode == TxMode::write && fence_) (*fence_)(tx);
  }
  bool cancel_on_signal_ = true;
  std::shared_ptr<const Fence> fence_;
  std::atomic<bool> severed_{false};

 private:
  int max_retries_;
  int64_t retries_ = 0;
};

// Signals do not stop st's statements while this lives (Store::cancel_on_signal), then do again.
class SignalsSpare {
 public:
  explicit SignalsSpare(Store& st) : st_(st) { st_.cancel_on_signal(false); }
  ~SignalsSpare() {
    try {
      st_.cancel_on_signal(true);
    } catch (...) {  // (out of memory registering the action: the flag still stops work at its checks)
    }
  }
  SignalsSpare(const SignalsSpare&) = delete;
  SignalsSpare& operator=(const SignalsSpare&) = delete;

 private:
  Store& st_;
};

struct StoreOptions {
  bool create_if_missing = false;  // SQLite: create the file (db migrate only)
  int busy_timeout_ms = 5000;
  int retries = 8;
  // PostgreSQL behind a pooler in transaction mode ([db] pooler = "transaction", docs/design.md §9.2):
  // nothing may outlive a transaction on the server connection, which the next transaction may not
  // get. Statements are sent unnamed (parsed each time) instead of prepared once, lock_timeout is
  // set per transaction (SET LOCAL) instead of per session, and leases are rows with an expiry.
  bool pooled = false;
  // Whether SIGINT/SIGTERM stop this store's work from the moment it opens (Store::cancel_on_signal;
  // off: a signal never cancels its statements, even those that open it and check its schema).
  // Off for serve's sessions, whose requests a first signal lets finish (docs/serve.md, "Stopping").
  bool cancel_on_signal = true;
  // PostgreSQL: a session that ended is opened again before the next transaction (docs/design.md
  // §9.4). Off for serve's sessions: serve opens a new session itself, and a reconnect inside a
  // request would wait on a server that does not answer where the request's deadline (sever)
  // cannot reach it - no socket is there yet to shut down.
  bool reconnect = true;
};

struct Dsn {
  Dialect dialect;
  std::string target;  // SQLite path, or the PostgreSQL URI / conninfo string
};
// "sqlite:PATH", "postgres://...", "postgresql://...", or a libpq conninfo ("host=... dbname=...").
// Throws Error(config) naming `source` for an unknown scheme or an empty path.
Dsn parse_dsn(const std::string& url, const std::string& source);

// Opens a store. Throws Error(unavailable) when the database cannot be reached or opened, and
// Error(config) when the SQLite file does not exist and create_if_missing is off.
std::unique_ptr<Store> open_store(const Dsn& dsn, const StoreOptions& opts);

std::unique_ptr<Store> open_sqlite(const std::string& path, const StoreOptions& opts);
std::unique_ptr<Store> open_postgres(const std::string& conninfo, const StoreOptions& opts);

// Transaction helper returning a value: T f(Tx&).
template <class F>
auto transact(Store& s, TxMode mode, F&& f) -> decltype(f(std::declval<Tx&>())) {
  using T = decltype(f(std::declval<Tx&>()));
  std::optional<T> out;
  s.transact(mode, [&](Tx& tx) { out.emplace(f(tx)); });
  return std::move(*out);
}

// A statement given another number of parameters than its text takes ($1 .. $N, the highest N
// outside string literals and quoted names): Error(internal) naming both counts and the statement,
// before anything is sent. (PostgreSQL would refuse it as a protocol violation, which libpqxx 6.4
// reports as a lost connection; SQLite would bind NULL to the missing ones.)
void check_parameter_count(const std::string& sql, size_t takes, size_t given);
// The highest $N of a statement's text outside string literals, quoted names and -- comments.
size_t placeholder_count(const std::string& sql);

// Sleeps before retry `attempt` (1-based): a short randomized exponential backoff.
void retry_backoff(int attempt);

}  // namespace rc::store
