// The Engine object: its options, the per-activity catalog cache and the sold-out memory. The claim
// flow is in claim.cpp, delivery in deliver.cpp.
#include "core/engine/engine.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>

#include "core/alert_outbox.hpp"
#include "core/engine/catalog.hpp"
#include "core/engine/lottery.hpp"
#include "base/error.hpp"

namespace rc::engine {

const char* status_name(Status s) {
  switch (s) {
    case Status::granted: return "granted";
    case Status::replayed: return "replayed";
    case Status::rejected: return "rejected";
    case Status::held: return "held";
  }
  return "?";
}

Engine::Engine(store::Store& st, const Clock& clock, EngineOptions opts)
    : st_(st), clock_(clock), opts_(std::move(opts)) {
  if (!opts_.getenv) opts_.getenv = [](const char* n) { return std::getenv(n); };
  if (!opts_.make_channel) opts_.make_channel = make_channel;
  for (const char* builtin : {"ledger", "outbox"}) {
    if (opts_.channels.count(builtin)) continue;
    delivery::ChannelConfig c;
    c.name = c.type = builtin;
    opts_.channels[builtin] = c;
  }
}

Engine::~Engine() = default;

int64_t Engine::draw_below(int64_t total) const {
  const int64_t v = opts_.draw_below ? opts_.draw_below(total) : random_below(total);
  if (v < 0 || v >= total)
    throw Error(Errc::internal,
                "a random draw of " + std::to_string(v) + " is outside [0, " + std::to_string(total) + ")");
  return v;
}

std::shared_ptr<const ActivityCatalog> Engine::catalog(store::Session& s, const std::string& code, int64_t id,
                                                       int64_t version) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = catalogs_.find(code);
    if (it != catalogs_.end() && it->second->id == id && it->second->version == version) return it->second;
  }
  auto c = load_catalog(s, id);
  // The claim follows one version's rules: a catalog of another version than the gate read (a
  // switch committed in between) makes the claim run again.
  if (c->version != version)
    throw store::Retryable("activity '" + code + "' switched to version " + std::to_string(c->version) +
                           " during the claim: the claim runs again under it");
  std::lock_guard<std::mutex> l(mu_);
  catalogs_[code] = c;
  return c;
}

// Sold-out memory uses the steady clock: the business clock may be fixed (REWARDCTL_NOW).
static int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Whether `key` was remembered in `seen` less than ttl_ms ago; an older memory is forgotten.
// REQUIRES: the caller holds mu_.
template <class K>
static bool recent(std::map<K, int64_t>& seen, const K& key, int64_t ttl_ms) {
  auto it = seen.find(key);
  if (it == seen.end()) return false;
  if (steady_ms() - it->second <= ttl_ms) return true;
  seen.erase(it);
  return false;
}

bool Engine::known_sold_out(int64_t prize_id) {
  std::lock_guard<std::mutex> l(mu_);
  return recent(sold_out_, prize_id, opts_.sold_out_memory_ms);
}

void Engine::remember_sold_out(int64_t prize_id) {
  std::lock_guard<std::mutex> l(mu_);
  sold_out_[prize_id] = steady_ms();
}

// An activity's memory in `seen` (uncovered_, chunk_refused_), under mu_, for sold_out_memory_ms.
bool Engine::recently(std::map<std::string, Millis>& seen, const std::string& activity) {
  std::lock_guard<std::mutex> l(mu_);
  return recent(seen, activity, opts_.sold_out_memory_ms);
}

void Engine::remember(std::map<std::string, Millis>& seen, const std::string& activity) {
  std::lock_guard<std::mutex> l(mu_);
  seen[activity] = steady_ms();
}

void Engine::announce_ladder(const LadderMove& m) {
  if (!m.up()) {
    spdlog::info("{}", describe(m));
    return;
  }
  spdlog::warn("{}", describe(m));
  if (!m.alert_id) return;
  try {
    deliver_alert(st_, *m.alert_id, opts_.post_alert, opts_.actor, clock_.now_ms());
  } catch (const std::exception& e) {
    // the claim is committed: an alert that cannot even be recorded stays pending for fuse-scan
    spdlog::error("budget ladder alert of {} not recorded (fuse-scan retries it): {}", m.activity, e.what());
  }
}

}  // namespace rc::engine
