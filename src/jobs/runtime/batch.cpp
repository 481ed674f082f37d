#include "jobs/runtime/batch.hpp"

namespace rc::jobs {

void transact_batch(store::Store& s, const std::function<void()>& rewind,
                    const std::function<void(store::Tx&)>& body) {
  int attempt = 0;
  s.transact(store::TxMode::write, [&](store::Tx& tx) {
    if (attempt++ > 0 && rewind) rewind();
    body(tx);
  });
}

}  // namespace rc::jobs
