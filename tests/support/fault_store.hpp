#pragma once
// A forwarding Store that dies at its Nth statement, in the spirit of leveldb's EnvWrapper and its
// fault-injection env: every statement (in a transaction or autocommit) is counted, and the Nth one
// throws Error(unavailable) instead of running, as when the connection drops. From then on every
// statement throws too, as if the process had been killed: the transaction that was open rolls
// back, and nothing after it runs. Used to prove that a flow leaves the books whole whatever
// statement it stops at (test_fault_every_statement.cpp).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/engine.hpp"
#include "core/store/store.hpp"
#include "support/seed.hpp"

namespace rt {

class FaultStore : public rc::store::Store {
 public:
  // fail_at: the 1-based statement that fails; 0 never fails (then it only counts).
  FaultStore(std::unique_ptr<rc::store::Store> inner, int64_t fail_at);
  ~FaultStore() override;

  int64_t statements() const { return count_; }  // statements started, the failed one included
  bool fired() const { return fired_; }
  const std::vector<std::string>& log() const { return log_; }  // every statement started, in order

  rc::store::Dialect dialect() const override { return inner_->dialect(); }
  std::string describe() const override { return inner_->describe(); }
  void transact(rc::store::TxMode mode, const std::function<void(rc::store::Tx&)>& fn) override;
  rc::store::Session& autocommit() override;
  std::unique_ptr<rc::store::BulkWriter> bulk_writer(rc::store::Tx& tx, const std::string& table,
                                                     const std::vector<std::string>& columns) override;

  // Called with each statement's text before it is counted and sent (in the caller's thread): a
  // test changes the world from another connection between two statements of one transaction.
  std::function<void(const std::string& sql)> before_each;

  // Counts one statement; throws when it is the one that fails or comes after it.
  void step(const std::string& sql);

 private:
  class FaultTx;
  class FaultSession;
  std::unique_ptr<rc::store::Store> inner_;
  std::unique_ptr<FaultSession> auto_;
  int64_t fail_at_, count_ = 0;
  bool fired_ = false;
  std::vector<std::string> log_;
};

// An in-process engine (actor "test", system clock) on db whose store is a FaultStore dying at
// statement fail_at (0: never; it only counts and logs). fs points at box's store.
struct Faulty {
  FaultStore* fs;
  EngineBox box;
};
Faulty faulty(const TestDb& db, int64_t fail_at, rc::engine::EngineOptions opts = {});

}  // namespace rt
