#include "support/fault_store.hpp"

namespace rt {

using rc::store::Params;
using rc::store::Result;

// Counts (and may fail) each statement, then forwards it to the wrapped session or transaction.
template <class Base, class Inner>
class Forward : public Base {
 public:
  Forward(FaultStore& fs, Inner& inner) : fs_(fs), inner_(inner) {}
  rc::store::Dialect dialect() const override { return inner_.dialect(); }
  Result query(const std::string& sql, const Params& params) override {
    fs_.step(sql);
    return inner_.query(sql, params);
  }
  void exec_script(const std::string& sql) override {
    fs_.step(sql);
    inner_.exec_script(sql);
  }
  Inner& inner() { return inner_; }

 private:
  FaultStore& fs_;
  Inner& inner_;
};

class FaultStore::FaultTx : public Forward<rc::store::Tx, rc::store::Tx> {
  using Forward::Forward;
};
class FaultStore::FaultSession : public Forward<rc::store::Session, rc::store::Session> {
  using Forward::Forward;
};

FaultStore::FaultStore(std::unique_ptr<rc::store::Store> inner, int64_t fail_at)
    : Store(0), inner_(std::move(inner)), fail_at_(fail_at) {}

FaultStore::~FaultStore() = default;

void FaultStore::step(const std::string& sql) {
  if (before_each) before_each(sql);
  ++count_;
  log_.push_back(sql);
  if (fired_ || (fail_at_ > 0 && count_ >= fail_at_)) {
    fired_ = true;
    throw rc::Error(rc::Errc::unavailable, "injected fault at statement " + std::to_string(count_) + ": " +
                                               sql.substr(0, 60));
  }
}

void FaultStore::transact(rc::store::TxMode mode, const std::function<void(rc::store::Tx&)>& fn) {
  if (fired_) step("BEGIN");
  inner_->transact(mode, [&](rc::store::Tx& tx) {
    FaultTx ft(*this, tx);
    fn(ft);
    if (ft.rollback_requested()) tx.rollback_only();
  });
}

rc::store::Session& FaultStore::autocommit() {
  if (!auto_) auto_ = std::make_unique<FaultSession>(*this, inner_->autocommit());
  return *auto_;
}

std::unique_ptr<rc::store::BulkWriter> FaultStore::bulk_writer(rc::store::Tx& tx, const std::string& table,
                                                               const std::vector<std::string>& columns) {
  step("COPY " + table);
  auto* ft = dynamic_cast<FaultTx*>(&tx);
  return inner_->bulk_writer(ft ? ft->inner() : tx, table, columns);
}

Faulty faulty(const TestDb& db, int64_t fail_at, rc::engine::EngineOptions opts) {
  EngineBox b;
  auto fs = std::make_unique<FaultStore>(db.open(), fail_at);
  FaultStore* raw = fs.get();
  b.store = std::move(fs);
  b.clock = std::make_unique<rc::SystemClock>();
  opts.actor = "test";
  b.engine = std::make_unique<rc::engine::Engine>(*b.store, *b.clock, std::move(opts));
  return {raw, std::move(b)};
}

}  // namespace rt
