// PostgreSQL implementation of the Store (libpqxx 6.4): one connection, statements prepared once
// per connection, READ COMMITTED transactions whose correctness rests on conditional updates and
// unique keys, and bounded retries on serialization failures and deadlocks.
#include <libpq-fe.h>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <unordered_map>

#include "core/interrupt.hpp"
#include "core/store/fault.hpp"
#include "core/store/store.hpp"

namespace rc::store {
namespace {

std::string first_line(const std::string& s) {
  auto nl = s.find('\n');
  std::string r = nl == std::string::npos ? s : s.substr(0, nl);
  while (!r.empty() && (r.back() == ' ' || r.back() == '\r')) r.pop_back();
  return r;
}

// The SQLSTATE of a libpqxx exception. libpqxx 6.4 leaves sql_error::sqlstate() empty for several
// errors (a permission denied on a prepared statement among them), and reports serialization
// failures and deadlocks as a transaction_rollback that is no sql_error at all; the exception's type
// still says its class.
std::string sqlstate_of(const std::exception& ex) {
  if (auto* se = dynamic_cast<const pqxx::sql_error*>(&ex); se && !se->sqlstate().empty()) return se->sqlstate();
  auto is = [&ex](auto* type) { return dynamic_cast<decltype(type)>(&ex) != nullptr; };
  if (is((const pqxx::serialization_failure*)nullptr)) return "40001";
  if (is((const pqxx::deadlock_detected*)nullptr)) return "40P01";
  if (is((const pqxx::statement_completion_unknown*)nullptr)) return "40003";
  if (is((const pqxx::transaction_rollback*)nullptr)) return "40000";
  if (is((const pqxx::unique_violation*)nullptr)) return "23505";
  if (is((const pqxx::integrity_constraint_violation*)nullptr)) return "23000";
  if (is((const pqxx::insufficient_privilege*)nullptr)) return "42501";
  if (is((const pqxx::too_many_connections*)nullptr)) return "53300";
  if (is((const pqxx::disk_full*)nullptr)) return "53100";
  if (is((const pqxx::out_of_memory*)nullptr)) return "53200";
  if (is((const pqxx::insufficient_resources*)nullptr)) return "53000";
  if (is((const pqxx::data_exception*)nullptr)) return "22000";
  if (is((const pqxx::undefined_table*)nullptr)) return "42P01";
  if (is((const pqxx::undefined_column*)nullptr)) return "42703";
  if (is((const pqxx::undefined_function*)nullptr)) return "42883";
  if (is((const pqxx::syntax_error*)nullptr)) return "42601";
  if (is((const pqxx::feature_not_supported*)nullptr)) return "0A000";
  if (is((const pqxx::invalid_cursor_state*)nullptr)) return "24000";
  if (is((const pqxx::invalid_sql_statement_name*)nullptr)) return "26000";
  if (is((const pqxx::invalid_cursor_name*)nullptr)) return "34000";
  return "";
}

// The prefix of this process's prepared statement names: unique to the process, so that behind a
// pooler in transaction mode that was not declared (db.pooler), a statement of another client on a
// shared server connection is never run in place of ours; the mismatch shows as 42P05 or 26000.
const std::string& statement_prefix() {
  static const std::string p = "rc" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}() % 1000000) + "_";
  return p;
}

// The server's reason for ending a session. A server that ends a session (pg_terminate_backend, a
// fast shutdown, idle_session_timeout) sends a FATAL error and closes the socket. libpqxx 6.4 loses
// it: the statement that meets the closed session fails with "Could not obtain client encoding: not
// connected", because building the error needs the session. The server's words are still at hand:
// when the session was idle, libpq hands the FATAL to the notice receiver (kept below); when a
// statement was under way, they are in libpq's connection error (PQerrorMessage). docs/design.md §9.4.
struct ServerFatal {
  std::string sqlstate, message;
};

// What a connection keeps for the error that ends it: the libpq handle of its current session and
// the last FATAL notice the server sent on it.
struct SessionEnd {
  PGconn* handle = nullptr;
  std::optional<ServerFatal> fatal;
};

std::atomic<PQnoticeReceiver> g_next_receiver{nullptr};

// (libpq runs the receiver inside a call on the connection, on the caller's thread)
void keep_fatal(void* arg, const PGresult* r) {
  const char* sev = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (sev && (std::strcmp(sev, "FATAL") == 0 || std::strcmp(sev, "PANIC") == 0)) {
    const char* st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const char* msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    static_cast<SessionEnd*>(arg)->fatal = ServerFatal{st ? st : "", msg ? msg : ""};
  }
  if (auto next = g_next_receiver.load()) next(arg, r);  // (libpq's own: on to libpqxx's notice processor)
}

// libpqxx's direct connection policy, installing the receiver above on every session it opens.
class ConnectKeepingReason : public pqxx::connect_direct {
 public:
  ConnectKeepingReason(const std::string& opts, SessionEnd& end) : pqxx::connect_direct(opts), end_(end) {}
  handle do_startconnect(handle orig) override {
    if (orig) return orig;
    handle h = pqxx::connect_direct::do_startconnect(orig);
    PQnoticeReceiver prev = PQsetNoticeReceiver(h, keep_fatal, &end_);
    if (prev != keep_fatal) g_next_receiver.store(prev);
    end_ = SessionEnd{h, std::nullopt};
    return h;
  }
  handle do_disconnect(handle orig) noexcept override {
    end_.handle = nullptr;
    return pqxx::connect_direct::do_disconnect(orig);
  }

 private:
  SessionEnd& end_;
};

// pqxx::connection (basic_connection_base<connect_direct>) with the policy above, and the means to
// name why its session ended.
class Connection : public pqxx::connection_base {
 public:
  explicit Connection(const std::string& opts) : pqxx::connection_base(policy_), opts_(opts), policy_(opts_, end_) {
    init();
  }
  ~Connection() noexcept { close(); }

  // The server's reason for the end of this session, once: the FATAL it sent, else the server's
  // words in libpq's connection error. Empty when neither says more than "not connected".
  std::optional<ServerFatal> take_end_reason() {
    if (end_.fatal) {
      auto f = std::move(end_.fatal);
      end_.fatal.reset();
      return f;
    }
    if (!end_.handle) return std::nullopt;
    const std::string text = PQerrorMessage(end_.handle);
    auto at = text.find("FATAL:  ");
    if (at == std::string::npos) return std::nullopt;
    std::string msg = text.substr(at + 8);
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    return ServerFatal{"", msg};
  }

 private:
  SessionEnd end_;
  std::string opts_;  // (before policy_, which keeps a reference to it)
  ConnectKeepingReason policy_;
};

// What an operator can do about a server-side condition, by SQLSTATE (empty: nothing to add).
std::string server_hint(const std::string& st) {
  const std::string cls = st.substr(0, 2);
  if (st == "57P01")
    return "the server ended this session (pg_terminate_backend, or a fast shutdown): what was not committed "
           "was rolled back; rerun once the server accepts connections";
  if (st == "57P02") return "the server is restarting after a crash of one of its processes: rerun shortly";
  if (st == "57P03") return "the server is starting up, shutting down or in recovery and accepts no sessions now: retry shortly";
  if (st == "57P05" || st == "25P03")
    return "the server closed a session idle past its timeout (idle_session_timeout, "
           "idle_in_transaction_session_timeout): rerun";
  if (st == "53300")
    return "the server has no connection slot free for this role or database: run fewer processes or worker "
           "threads (serve --threads), raise max_connections or the role's CONNECTION LIMIT, or connect through "
           "a pooler (docs/design.md §9.2)";
  if (cls == "53") return "the server is short of a resource (disk, memory): free it, then rerun";
  if (cls == "28")
    return "the server refused these credentials: check the user and the password (PGPASSFILE/.pgpass, PGPASSWORD "
           "or PGSERVICE) for --db or REWARDCTL_DB";
  if (st == "3D000") return "no database of that name on the server: check dbname in --db or REWARDCTL_DB";
  if (st == "55000")
    return "the database does not allow connections now (ALTER DATABASE ... ALLOW_CONNECTIONS, or it is being "
           "created or dropped): ask its administrator";
  if (cls == "08") return "check that the server is up and reachable (--db, REWARDCTL_DB or PGHOST/PGPORT/PGSERVICE)";
  return "";
}

// The SQLSTATE that the server's (or libpq's) standard words stand for, where only the words are
// at hand: a failed connection attempt (libpq gives text, no SQLSTATE), and a session's end read
// from libpq's connection error. Unknown words: fallback.
std::string sqlstate_of_words(const std::string& msg, const std::string& fallback) {
  auto has = [&msg](const char* w) { return msg.find(w) != std::string::npos; };
  if (has("too many clients") || has("too many connections") || has("connection slots are reserved") ||
      has("no more connections allowed"))
    return "53300";
  if (has("due to administrator command")) return "57P01";
  if (has("crash of another server process")) return "57P02";
  if (has("database system is starting up") || has("database system is shutting down") ||
      has("in recovery mode") || has("not yet accepting connections") || has("not accepting connections"))
    return "57P03";
  if (has("idle-session timeout")) return "57P05";
  if (has("idle-in-transaction timeout")) return "25P03";
  if (has("password authentication failed")) return "28P01";
  if (has("is not currently accepting connections")) return "55000";
  if (has("authentication failed") || has("no pg_hba.conf entry") || has("password is required") ||
      has("no password supplied") ||
      (has("role \"") && has("does not exist")))
    return "28000";
  if (has("database \"") && has("does not exist")) return "3D000";
  return fallback;
}

// The server's words without libpq's severity prefix ("ERROR:  ", "FATAL:  ").
std::string server_words(const std::string& what) {
  std::string s = first_line(what);
  for (const char* p : {"ERROR:  ", "FATAL:  ", "PANIC:  "})
    if (s.rfind(p, 0) == 0) return s.substr(std::strlen(p));
  return s;
}

// Every libpqxx exception becomes the project's error through the one classification in
// store/fault.hpp; the message keeps the SQLSTATE so that an operator can look it up.
[[noreturn]] void rethrow_pg(const std::exception& ex, const std::string& sql, Connection& conn) {
  const std::string st = sqlstate_of(ex);
  if (st == "42P05" || st == "26000")  // our prepared statements met another connection's state
    throw Error(Errc::config, "PostgreSQL error " + st + ": " + first_line(ex.what()) +
                                  ": the server connection changed between this command's statements, as it does "
                                  "behind a pooler in transaction mode (PgBouncer): set [db] pooler = \"transaction\" "
                                  "or REWARDCTL_DB_POOLER=transaction (docs/design.md §9.2)");
  if (!st.empty()) {
    const Fault f = classify_sqlstate(st, interrupted());
    std::string msg = "PostgreSQL error " + st + ": " + server_words(ex.what());
    if (f == Fault::unavailable && !server_hint(st).empty()) msg += " (" + server_hint(st) + ")";
    else if (f == Fault::no_perm) msg += " (grant the database role this privilege, or connect as one that has it)";
    else if (f == Fault::interrupted) msg = "interrupted: the statement in progress was cancelled and its transaction "
                                            "rolled back; rerun to continue";
    else if (f == Fault::bug) msg += " in: " + sql.substr(0, 200);
    throw_fault(f, msg);
  }
  if (dynamic_cast<const pqxx::broken_connection*>(&ex) || dynamic_cast<const pqxx::failure*>(&ex)) {
    // the server's own reason, when it gave one before it closed the session
    if (auto fatal = conn.take_end_reason()) {
      if (fatal->sqlstate.empty()) fatal->sqlstate = sqlstate_of_words(fatal->message, "08006");
      std::string msg = "lost the PostgreSQL connection: PostgreSQL error " + fatal->sqlstate + ": " + fatal->message;
      if (auto hint = server_hint(fatal->sqlstate); !hint.empty()) msg += " (" + hint + ")";
      throw Error(Errc::unavailable, msg);
    }
  }
  if (dynamic_cast<const pqxx::broken_connection*>(&ex)) {
    std::string msg = "lost the PostgreSQL connection: " + first_line(ex.what());
    if (const std::string st = sqlstate_of_words(ex.what(), ""); !st.empty()) msg += " (" + st + ": " + server_hint(st) + ")";
    throw Error(Errc::unavailable, msg);
  }
  if (dynamic_cast<const pqxx::in_doubt_error*>(&ex))
    throw Error(Errc::unavailable, "PostgreSQL commit outcome unknown (connection lost during COMMIT): " +
                                       first_line(ex.what()));
  // a pqxx::failure without a SQLSTATE is the transport (a COPY stream, a lost socket), not our SQL
  if (dynamic_cast<const pqxx::failure*>(&ex))
    throw Error(Errc::unavailable, "PostgreSQL connection failed: " + first_line(ex.what()));
  throw Error(Errc::internal, std::string("PostgreSQL: ") + first_line(ex.what()));
}

Result convert(const pqxx::result& r) {
  Result out;
  int ncol = r.columns();
  for (int c = 0; c < ncol; ++c) out.columns.emplace_back(r.column_name(c));
  out.rows.reserve(r.size());
  for (const auto& row : r) {
    Row o;
    o.cells.reserve(ncol);
    for (int c = 0; c < ncol; ++c) {
      const auto& f = row[c];
      if (f.is_null()) o.cells.emplace_back(std::monostate{});
      else o.cells.emplace_back(std::string(f.c_str(), f.size()));
    }
    out.rows.push_back(std::move(o));
  }
  out.affected = r.affected_rows();
  return out;
}

// A statement prepared on the connection: its name and how many parameters its text takes.
struct Prepared {
  std::string name;
  size_t params = 0;
};

class PgSession : public Tx {
 public:
  // prepared == nullptr: every statement is sent unnamed (a pooler in transaction mode).
  PgSession(Connection& c, pqxx::transaction_base& t, std::unordered_map<std::string, Prepared>* prepared)
      : conn_(c), t_(t), prepared_(prepared) {}
  Dialect dialect() const override { return Dialect::postgres; }

  Result query(const std::string& sql, const Params& params) override {
    try {
      const Prepared* prep = nullptr;
      if (prepared_) {
        auto it = prepared_->find(sql);
        if (it == prepared_->end()) {
          Prepared p{statement_prefix() + std::to_string(prepared_->size() + 1), placeholder_count(sql)};
          conn_.prepare(p.name, sql);
          it = prepared_->emplace(sql, std::move(p)).first;
        }
        prep = &it->second;
        check_parameter_count(sql, prep->params, params.size());
      } else {
        check_parameter_count(sql, placeholder_count(sql), params.size());
      }
      std::vector<std::string> storage;
      storage.reserve(params.size());
      std::vector<const char*> ptrs;
      ptrs.reserve(params.size());
      for (const auto& v : params) {
        if (auto p = std::get_if<int64_t>(&v)) {
          storage.push_back(std::to_string(*p));
          ptrs.push_back(nullptr);
        } else if (auto s = std::get_if<std::string>(&v)) {
          storage.push_back(*s);
          ptrs.push_back(nullptr);
        } else {
          storage.emplace_back();
          ptrs.push_back(nullptr);
        }
      }
      for (size_t i = 0; i < params.size(); ++i)
        if (!std::holds_alternative<std::monostate>(params[i])) ptrs[i] = storage[i].c_str();
      if (prep) return convert(t_.exec_prepared(prep->name, pqxx::prepare::make_dynamic_params(ptrs)));
      // an unnamed statement (PQexecParams): parsed and planned each time, and nothing is left
      // behind on the server connection for another client to collide with
      return convert(t_.exec_params(sql, pqxx::prepare::make_dynamic_params(ptrs)));
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      rethrow_pg(e, sql, conn_);
    }
  }

  void exec_script(const std::string& sql) override {
    try {
      t_.exec(sql);
    } catch (const std::exception& e) {
      rethrow_pg(e, sql, conn_);
    }
  }

  pqxx::transaction_base& raw() { return t_; }

 private:
  Connection& conn_;
  pqxx::transaction_base& t_;
  std::unordered_map<std::string, Prepared>* prepared_;
};

// Each statement in its own implicit transaction.
class PgAutoSession : public Session {
 public:
  PgAutoSession(Connection& c, std::unordered_map<std::string, Prepared>* prepared, std::function<void()> reopen)
      : conn_(c), prepared_(prepared), reopen_(std::move(reopen)) {}
  Dialect dialect() const override { return Dialect::postgres; }
  // Beginning the nontransaction can fail too (a connection lost while idle): it is mapped like
  // the statement's own failure, so that a lost server is unavailable (69, 503), never internal.
  Result query(const std::string& sql, const Params& params) override {
    auto n = begin(sql);
    PgSession s(conn_, *n, prepared_);
    return s.query(sql, params);
  }
  void exec_script(const std::string& sql) override {
    auto n = begin(sql);
    PgSession s(conn_, *n, prepared_);
    s.exec_script(sql);
  }

 private:
  std::unique_ptr<pqxx::nontransaction> begin(const std::string& sql) {
    reopen_();
    try {
      return std::make_unique<pqxx::nontransaction>(conn_);
    } catch (const std::exception& e) {
      rethrow_pg(e, sql, conn_);
    }
  }

  Connection& conn_;
  std::unordered_map<std::string, Prepared>* prepared_;
  std::function<void()> reopen_;
};

class PgBulk : public BulkWriter {
 public:
  PgBulk(Connection& c, pqxx::transaction_base& t, const std::string& table, const std::vector<std::string>& cols)
      : conn_(c), stream_(t, table, cols), ncol_(cols.size()) {}
  void write_row(const std::vector<std::optional<std::string>>& row) override {
    if (row.size() != ncol_) throw Error(Errc::internal, "COPY row has the wrong number of columns");
    try {
      switch (ncol_) {
        case 1: put<1>(row); break;
        case 2: put<2>(row); break;
        case 3: put<3>(row); break;
        case 4: put<4>(row); break;
        case 5: put<5>(row); break;
        case 6: put<6>(row); break;
        case 7: put<7>(row); break;
        case 8: put<8>(row); break;
        case 9: put<9>(row); break;
        case 10: put<10>(row); break;
        default: throw Error(Errc::internal, "COPY supports 1 to 10 columns");
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      rethrow_pg(e, "COPY", conn_);
    }
  }
  void finish() override {
    try {
      stream_.complete();
    } catch (const std::exception& e) {
      rethrow_pg(e, "COPY", conn_);
    }
  }

 private:
  // libpqxx 6.4 streams tuples only; std::array is one, and a null const char* becomes \\N.
  template <size_t N>
  void put(const std::vector<std::optional<std::string>>& row) {
    std::array<const char*, N> a;
    for (size_t i = 0; i < N; ++i) a[i] = row[i] ? row[i]->c_str() : nullptr;
    stream_ << a;
  }
  Connection& conn_;
  pqxx::stream_to stream_;
  size_t ncol_;
};

class PgStore : public Store {
 public:
  PgStore(const std::string& conninfo, const StoreOptions& o) : Store(o.retries, o.cancel_on_signal), opts_(o), conninfo_(conninfo) {
    try {
      conn_ = std::make_unique<Connection>(conninfo);
    } catch (const std::exception& e) {
      throw_cannot_connect("cannot connect to PostgreSQL: ", e);
    }
    desc_ = "postgresql host=" + std::string(conn_->hostname() ? conn_->hostname() : "") +
            " port=" + std::string(conn_->port() ? conn_->port() : "") +
            " dbname=" + std::string(conn_->dbname() ? conn_->dbname() : "");
    const std::string timeout = "lock_timeout = '" + std::to_string(std::max(1, o.busy_timeout_ms)) + "ms'";
    lock_timeout_ = "SET LOCAL " + timeout;
    session_setup_ = "SET " + timeout;
    try {
      set_up_session();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      rethrow_pg(e, session_setup_, *conn_);
    }
    // SIGINT/SIGTERM cancel the statement in progress (a batch's INSERT may run for minutes), so
    // that the command stops at once with its transaction rolled back. libpq's cancel request
    // (PQgetCancel + PQcancel, made for use from another thread) goes to the server on its own
    // socket, addressed by this session's backend key, which a connection pooler routes too;
    // PQgetCancel only reads what the connection fixed when it was opened.
    if (cancel_on_signal_) cancel_changed(true);
  }
  ~PgStore() override { remove_interrupt_action(cancel_action_); }
  // (remove_interrupt_action waits for a cancel request under way: the actions run under its lock)
  void cancel_changed(bool on) override {
    if (!on) {
      remove_interrupt_action(cancel_action_);
      cancel_action_ = 0;
    } else if (!cancel_action_) {
      cancel_action_ = add_interrupt_action([c = conn_.get()] { c->cancel_query(); });
    }
  }

  bool connection_lost() const override { return !conn_->is_open(); }

  // A session that ended (the server terminated it, restarted, or the network broke) is opened
  // again before the next transaction or statement: libpqxx 6.4 would go on with the dead handle
  // ("Connection to database failed"), so that, say, a job could not record why it failed. The
  // new session starts clean: what was not committed on the old one was rolled back by the server.
  void reopen_if_lost() {
    if (conn_->is_open() || severed_ || !opts_.reconnect) return;
    conn_->disconnect();  // (libpqxx connects a closed connection again at its next statement)
    spdlog::info("PostgreSQL session lost: connecting again ({})", desc_);
    try {
      set_up_session();
    } catch (const Error&) {
      throw;
    } catch (const pqxx::broken_connection& e) {
      throw_cannot_connect("lost the PostgreSQL connection, and cannot connect again: ", e);
    }
  }

  void sever() override {
    severed_ = true;
    // the blocked read (or write) returns at once; libpq then reports a lost connection
    if (int fd = conn_->sock(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }

  Dialect dialect() const override { return Dialect::postgres; }
  std::string describe() const override { return desc_; }
  Store* companion(size_t i) override {
    while (companions_.size() <= i) companions_.push_back(std::make_unique<PgStore>(conninfo_, opts_));
    companions_[i]->set_fence(fence_);
    return companions_[i].get();
  }
  void set_fence(std::shared_ptr<const Fence> f) override {
    for (auto& c : companions_) c->set_fence(f);
    Store::set_fence(std::move(f));
  }

  void transact(TxMode mode, const std::function<void(Tx&)>& fn) override {
    for (int attempt = 0;; ++attempt) {
      std::string why;
      reopen_if_lost();
      try {
        if (mode == TxMode::write) {
          pqxx::work w(*conn_);
          run(w, mode, fn);
        } else {
          pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> w(*conn_);
          run(w, mode, fn);
        }
        return;
      } catch (const Retryable& e) {
        why = e.what();
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        try {
          rethrow_pg(e, "COMMIT", *conn_);
        } catch (const Retryable& r) {
          why = r.what();
        }
      }
      before_retry(attempt, why);
    }
  }

  Session& autocommit() override {
    if (!auto_) auto_ = std::make_unique<PgAutoSession>(*conn_, opts_.pooled ? nullptr : &prepared_, [this] { reopen_if_lost(); });
    return *auto_;
  }

  std::unique_ptr<BulkWriter> bulk_writer(Tx& tx, const std::string& table,
                                          const std::vector<std::string>& columns) override {
    auto& s = dynamic_cast<PgSession&>(tx);
    return std::make_unique<PgBulk>(*conn_, s.raw(), table, columns);
  }

 private:
  // A failed connection attempt, classified by libpq's words (it gives no SQLSTATE).
  [[noreturn]] static void throw_cannot_connect(const std::string& what, const std::exception& e) {
    // libpq's text names the server it tried ("connection to server at ... failed: FATAL: ...")
    const std::string st = sqlstate_of_words(e.what(), "08001");
    const Errc code = st.substr(0, 2) == "28" ? Errc::not_permitted : st == "3D000" ? Errc::config : Errc::unavailable;
    throw Error(code, what + first_line(e.what()) + " (" + st + ": " + server_hint(st) + ")");
  }

  // The session's settings (behind a transaction pooler, a session setting would stay on a shared
  // connection: each transaction sets lock_timeout LOCAL instead).
  // A connection that cannot be made is thrown as libpqxx threw it (broken_connection).
  void set_up_session() {
    if (opts_.pooled) return;
    pqxx::nontransaction n(*conn_);
    try {
      n.exec(session_setup_);
    } catch (const pqxx::broken_connection&) {
      throw;
    } catch (const std::exception& e) {
      rethrow_pg(e, session_setup_, *conn_);
    }
  }

  template <class W>
  void run(W& w, TxMode mode, const std::function<void(Tx&)>& fn) {
    PgSession s(*conn_, w, opts_.pooled ? nullptr : &prepared_);
    if (opts_.pooled) s.exec_script(lock_timeout_);
    run_fence(mode, s);
    fn(s);
    if (s.rollback_requested()) w.abort();
    else w.commit();
  }

  StoreOptions opts_;
  std::string conninfo_;  // (for companions; never printed: it may hold a password)
  std::vector<std::unique_ptr<PgStore>> companions_;
  std::unique_ptr<Connection> conn_;
  std::unordered_map<std::string, Prepared> prepared_;
  std::string desc_;
  std::string lock_timeout_;  // "SET LOCAL lock_timeout = '5000ms'"
  std::string session_setup_;  // "SET lock_timeout = '5000ms'"
  std::unique_ptr<PgAutoSession> auto_;
  int cancel_action_ = 0;
};

}  // namespace

std::unique_ptr<Store> open_postgres(const std::string& conninfo, const StoreOptions& opts) {
  return std::make_unique<PgStore>(conninfo, opts);
}

}  // namespace rc::store
