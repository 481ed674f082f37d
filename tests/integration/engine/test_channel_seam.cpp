// The delivery channel seam (core/engine/channel.hpp): the engine delivers through whatever
// EngineOptions::make_channel builds, so a channel can time out, fail or throw on cue without HTTP,
// and the grant's state machine, bill and resend bill follow the outcome exactly. The reconcile
// oracle runs over every test's database at its end.
#include <doctest/doctest.h>

#include <deque>
#include <functional>
#include <mutex>

#include "core/delivery/channel.hpp"
#include "core/engine/channel.hpp"
#include "base/error.hpp"
#include "support/seed.hpp"
#include "support/webhook_endpoint.hpp"

using namespace rt;
using rc::delivery::Outcome;

namespace {

// A remote channel that answers from a script, one entry per call; "throw" raises an Error as a
// broken client would. It records every bill number it was called with.
struct Scripted : rc::engine::Channel {
  std::mutex mu;
  std::deque<std::string> script;
  std::vector<std::string> bills;
  std::function<void(const std::string& bill)> during;  // runs inside each call
  bool in_database() const override { return false; }
  int timeout_ms() const override { return 700; }
  rc::delivery::Result call(const rc::delivery::Request& r) override {
    std::lock_guard<std::mutex> l(mu);
    bills.push_back(r.bill_no);
    if (during) during(r.bill_no);
    std::string next = script.empty() ? "ok" : script.front();
    if (!script.empty()) script.pop_front();
    if (next == "throw") throw rc::Error(rc::Errc::busy, "client broke");
    if (next == "ok") return {Outcome::success, "0", ""};
    if (next == "final") return {Outcome::failed, "2001", "no such user"};
    if (next == "retry") return {Outcome::retryable, "1001", "busy"};
    return {Outcome::unknown, "timeout", "no answer in 700 ms"};
  }
};

// An activity whose prize goes out through channel `wallet`, and engine options whose factory
// builds `wallet` as the scripted channel (the others as built in). `made` counts the builds.
struct Fixture {
  TestDb db;
  Scripted* wallet = nullptr;
  int made = 0;
  rc::engine::EngineOptions opts;
  explicit Fixture(int64_t stock = 10) {
    db.migrate();
    std::string cfg = webhook_config(db, 9);  // nothing listens: only the scripted channel is called
    Spec s;
    s.channel = "wallet";
    s.stock = stock;
    seed(db, s, {{"HOOK_SECRET", kHookSecret}, {"REWARDCTL_CONFIG", cfg}});
    opts = webhook_engine_options(cfg);
    opts.make_channel = [this](const rc::delivery::ChannelConfig& c,
                               const rc::GetEnv& env) -> std::unique_ptr<rc::engine::Channel> {
      ++made;
      if (c.name != "wallet") return rc::engine::make_channel(c, env);
      auto ch = std::make_unique<Scripted>();
      wallet = ch.get();
      return ch;
    };
  }
};

}  // namespace

TEST_CASE("channel seam: a timeout leaves delayed_resend with the bill number the resend reuses") {
  Fixture f;
  const rc::Millis t0 = 1'800'000'000'000;
  auto b = engine(f.db, t0, f.opts);
  auto first = claim(*b.engine, "act", "u1", "b1");  // the factory builds wallet on this first use
  REQUIRE(f.wallet);
  f.wallet->script = {"timeout"};
  // during the call the grant is committed in issuing with its bill and a pending resend bill that
  // falls due only after the channel's own timeout plus the first delay (60 s): a crash now leaves a
  // resend with the same bill number
  int64_t due_during_call = 0, issuing_during_call = 0;
  f.wallet->during = [&](const std::string& bill) {
    due_during_call = f.db.count("SELECT next_attempt_at FROM resend_bill WHERE bill_no = $1 AND state = 'pending'", {bill});
    issuing_during_call = f.db.count("SELECT count(*) FROM grants WHERE bill_no = $1 AND state = 'issuing'", {bill});
  };
  auto o = claim(*b.engine, "act", "u2", "b2");
  REQUIRE(o.grant);
  CHECK(o.grant->state == rc::GrantState::delayed_resend);
  REQUIRE(f.wallet->bills.size() == 2);
  const std::string bill = f.wallet->bills[1];
  CHECK(o.grant->bill_no == bill);
  CHECK(due_during_call == t0 + 700 + 60'000);
  CHECK(issuing_during_call == 1);
  f.wallet->during = nullptr;
  // after the unknown outcome: the first backoff step, 60 s less up to a fifth of jitter
  const int64_t due = f.db.count("SELECT next_attempt_at FROM resend_bill WHERE bill_no = $1 AND state = 'pending'", {bill});
  CHECK(due >= t0 + 48'000);
  CHECK(due <= t0 + 60'000);
  CHECK(f.db.count("SELECT count(*) FROM delivery_bill WHERE bill_no = $1 AND state = 'unknown'", {bill}) == 1);
  // the next delivery calls the channel again with the same bill number, and it succeeds
  auto d = b.engine->deliver(o.grant->id);
  CHECK(d.delivered_now);
  CHECK(d.state == rc::GrantState::success);
  REQUIRE(f.wallet->bills.size() == 3);
  CHECK(f.wallet->bills[2] == bill);
  CHECK(f.db.count("SELECT attempts FROM delivery_bill WHERE bill_no = $1", {bill}) == 2);
  CHECK(f.db.count("SELECT count(*) FROM resend_bill WHERE bill_no = $1 AND state = 'done'", {bill}) == 1);
  CHECK(first.grant->state == rc::GrantState::success);
  CHECK(f.made == 1);  // built once, reused
}

TEST_CASE("channel seam: a final failure fails the grant and gives its unit back") {
  Fixture f(5);
  auto b = engine(f.db, std::nullopt, f.opts);
  claim(*b.engine, "act", "u0", "b0");
  f.wallet->script = {"final"};
  auto o = claim(*b.engine, "act", "u1", "b1");
  REQUIRE(o.grant);
  CHECK(o.grant->state == rc::GrantState::failed);
  CHECK(f.db.count("SELECT count(*) FROM grants WHERE state = 'failed' AND reason LIKE '%2001%'") == 1);
  CHECK(f.db.count("SELECT count(*) FROM resend_bill WHERE state = 'manual'") == 1);
  // one success holds a unit; the failed grant's unit is back
  CHECK(f.db.count("SELECT sum(remain) FROM stock") == 4);
}

TEST_CASE("channel seam: a retryable answer and a throwing client both wait for a resend") {
  Fixture f;
  auto b = engine(f.db, std::nullopt, f.opts);
  claim(*b.engine, "act", "u0", "b0");
  f.wallet->script = {"retry", "throw"};
  auto r = claim(*b.engine, "act", "u1", "b1");
  auto t = claim(*b.engine, "act", "u2", "b2");
  REQUIRE(r.grant);
  REQUIRE(t.grant);
  CHECK(r.grant->state == rc::GrantState::delayed_resend);
  CHECK(t.grant->state == rc::GrantState::delayed_resend);
  CHECK(f.db.count("SELECT count(*) FROM delivery_bill WHERE state = 'retryable' AND last_code = '1001'") == 1);
  CHECK(f.db.count("SELECT count(*) FROM delivery_bill WHERE state = 'unknown' AND last_code = 'local_error'") == 1);
  CHECK(f.db.count("SELECT count(*) FROM resend_bill WHERE state = 'pending'") == 2);
  // nothing was given back: both grants still hold their units
  CHECK(f.db.count("SELECT sum(remain) FROM stock") == 7);
}

TEST_CASE("channel seam: an in-database channel built by the factory delivers inside the claim's transaction") {
  Fixture f;
  auto b = engine(f.db, std::nullopt, f.opts);
  // a prize on the built-in ledger: the same factory builds it, and the claim delivers through it
  // before its commit (no call, no resend bill)
  Spec s;
  s.code = "led";
  seed(f.db, s);
  auto o = claim(*b.engine, "led", "u1", "b1");
  REQUIRE(o.grant);
  CHECK(o.grant->state == rc::GrantState::success);
  CHECK(f.made == 1);
  CHECK_FALSE(f.wallet);  // wallet was never needed
  CHECK(f.db.count("SELECT count(*) FROM ledger_entry") == 1);
  CHECK(f.db.count("SELECT count(*) FROM resend_bill") == 0);
}
