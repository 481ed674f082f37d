// PostgreSQL implementation of the Store (libpqxx 6.4): one connection, statements prepared once
// per connection, READ COMMITTED transactions whose correctness rests on conditional updates and
// unique keys, and bounded retries on serialization failures and deadlocks.
#include <pqxx/pqxx>

#include <sys/socket.h>
#include <unistd.h>

#include <array>
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

// Every libpqxx exception becomes the project's error through the one classification in
// store/fault.hpp; the message keeps the SQLSTATE so that an operator can look it up.
[[noreturn]] void rethrow_pg(const std::exception& ex, const std::string& sql) {
  const std::string st = sqlstate_of(ex);
  if (st == "42P05" || st == "26000")  // our prepared statements met another connection's state
    throw Error(Errc::config, "PostgreSQL error " + st + ": " + first_line(ex.what()) +
                                  ": the server connection changed between this command's statements, as it does "
                                  "behind a pooler in transaction mode (PgBouncer): set [db] pooler = \"transaction\" "
                                  "or REWARDCTL_DB_POOLER=transaction (docs/design.md §9.2)");
  if (!st.empty()) {
    const Fault f = classify_sqlstate(st, interrupted());
    std::string msg = "PostgreSQL error " + st + ": " + first_line(ex.what());
    if (f == Fault::no_perm) msg += " (grant the database role this privilege, or connect as one that has it)";
    else if (f == Fault::interrupted) msg = "interrupted: the statement in progress was cancelled and its transaction "
                                            "rolled back; rerun to continue";
    else if (f == Fault::bug) msg += " in: " + sql.substr(0, 200);
    throw_fault(f, msg);
  }
  if (dynamic_cast<const pqxx::broken_connection*>(&ex))
    throw Error(Errc::unavailable, "lost the PostgreSQL connection: " + first_line(ex.what()));
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
  PgSession(pqxx::connection& c, pqxx::transaction_base& t, std::unordered_map<std::string, Prepared>* prepared)
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
      rethrow_pg(e, sql);
    }
  }

  void exec_script(const std::string& sql) override {
    try {
      t_.exec(sql);
    } catch (const std::exception& e) {
      rethrow_pg(e, sql);
    }
  }

  pqxx::transaction_base& raw() { return t_; }

 private:
  pqxx::connection& conn_;
  pqxx::transaction_base& t_;
  std::unordered_map<std::string, Prepared>* prepared_;
};

// Each statement in its own implicit transaction.
class PgAutoSession : public Session {
 public:
  PgAutoSession(pqxx::connection& c, std::unordered_map<std::string, Prepared>* prepared)
      : conn_(c), prepared_(prepared) {}
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
    try {
      return std::make_unique<pqxx::nontransaction>(conn_);
    } catch (const std::exception& e) {
      rethrow_pg(e, sql);
    }
  }

  pqxx::connection& conn_;
  std::unordered_map<std::string, Prepared>* prepared_;
};

class PgBulk : public BulkWriter {
 public:
  PgBulk(pqxx::transaction_base& t, const std::string& table, const std::vector<std::string>& cols)
      : stream_(t, table, cols), ncol_(cols.size()) {}
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
      rethrow_pg(e, "COPY");
    }
  }
  void finish() override {
    try {
      stream_.complete();
    } catch (const std::exception& e) {
      rethrow_pg(e, "COPY");
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
  pqxx::stream_to stream_;
  size_t ncol_;
};

class PgStore : public Store {
 public:
  PgStore(const std::string& conninfo, const StoreOptions& o) : Store(o.retries, o.cancel_on_signal), opts_(o), conninfo_(conninfo) {
    try {
      conn_ = std::make_unique<pqxx::connection>(conninfo);
    } catch (const std::exception& e) {
      throw Error(Errc::unavailable, "cannot connect to PostgreSQL: " + first_line(e.what()) +
                                         " (check --db, REWARDCTL_DB or PGHOST/PGPORT/PGSERVICE)");
    }
    desc_ = "postgresql host=" + std::string(conn_->hostname() ? conn_->hostname() : "") +
            " port=" + std::string(conn_->port() ? conn_->port() : "") +
            " dbname=" + std::string(conn_->dbname() ? conn_->dbname() : "");
    const std::string timeout = "lock_timeout = '" + std::to_string(std::max(1, o.busy_timeout_ms)) + "ms'";
    lock_timeout_ = "SET LOCAL " + timeout;
    if (!o.pooled) {  // (behind a transaction pooler, a session setting would stay on a shared connection)
      try {
        pqxx::nontransaction n(*conn_);
        n.exec("SET " + timeout);
      } catch (const std::exception& e) {
        rethrow_pg(e, "SET lock_timeout");
      }
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
          rethrow_pg(e, "COMMIT");
        } catch (const Retryable& r) {
          why = r.what();
        }
      }
      before_retry(attempt, why);
    }
  }

  Session& autocommit() override {
    if (!auto_) auto_ = std::make_unique<PgAutoSession>(*conn_, opts_.pooled ? nullptr : &prepared_);
    return *auto_;
  }

  std::unique_ptr<BulkWriter> bulk_writer(Tx& tx, const std::string& table,
                                          const std::vector<std::string>& columns) override {
    auto& s = dynamic_cast<PgSession&>(tx);
    return std::make_unique<PgBulk>(s.raw(), table, columns);
  }

 private:
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
  std::unique_ptr<pqxx::connection> conn_;
  std::unordered_map<std::string, Prepared> prepared_;
  std::string desc_;
  std::string lock_timeout_;  // "SET LOCAL lock_timeout = '5000ms'"
  std::unique_ptr<PgAutoSession> auto_;
  int cancel_action_ = 0;
};

}  // namespace

std::unique_ptr<Store> open_postgres(const std::string& conninfo, const StoreOptions& opts) {
  return std::make_unique<PgStore>(conninfo, opts);
}

}  // namespace rc::store
