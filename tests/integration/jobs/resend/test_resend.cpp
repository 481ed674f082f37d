// rewardctl resend and the end of a failed delivery, on the backend under test, against a local
// webhook endpoint: one bill number through failures, timeouts and the final success, attempt times
// that follow the backoff (a fixed clock per run), stranded init grants, manual after expiry, retry,
// abandon, a final "no" that gives back stock, budget and limit count once, and concurrent runs
// that deliver each bill once.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/jobs.hpp"
#include "support/seed.hpp"
#include "support/webhook_endpoint.hpp"

using nlohmann::json;
using namespace rt;

namespace {

const int64_t T0 = 1893456000000;  // 2030-01-01T00:00:00Z
const int64_t kMin = 60'000;

struct World {
  TestDb db;
  Endpoint ep;
  std::string cfg;
  std::map<std::string, std::string> env;

  explicit World(bool webhook = true, int64_t stock = 5) {
    db.migrate();
    cfg = webhook_config(db, ep.port);
    env = {{"HOOK_SECRET", kHookSecret}, {"REWARDCTL_CONFIG", cfg}};
    Spec s;
    if (webhook) s.channel = "wallet";
    s.stock = stock;
    s.budget = 10000;
    s.limit = 1;
    seed(db, s, env);
  }
  std::map<std::string, std::string> at(int64_t ms) const {
    auto e = env;
    e["REWARDCTL_NOW"] = rc::format_utc(ms);
    return e;
  }
  json claim(const std::string& user, const std::string& biz, int64_t when, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{"claim", "act", "--user", user, "--biz-id", biz, "-o", "json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return rt::last_json(db.ok(a, 0, at(when)));
  }
  json resend(int64_t when, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{"resend", "-o", "json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return rt::last_json(db.ok(a, 0, at(when)));
  }
  int64_t stock() { return db.count("SELECT sum(remain) FROM stock"); }
  int64_t budget() { return db.count("SELECT consumed_cents FROM budget"); }
  int64_t limits() { return db.count("SELECT coalesce(sum(used), 0) FROM limit_counter"); }
  int64_t releases() {
    return db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND request_id = 'release'");
  }
};

}  // namespace

TEST_CASE("resend: a failure, a timeout, then success - one delivery, one bill number, attempts on the backoff") {
  World w;
  w.ep.set("retry");
  auto g = w.claim("u1", "b1", T0);
  REQUIRE(g["state"] == "delayed_resend");
  const std::string bill = g["bill_no"];
  int64_t next1 = w.db.count("SELECT next_attempt_at FROM resend_bill");
  CHECK(next1 >= T0 + 48'000);  // 60 s, less up to a fifth of jitter
  CHECK(next1 <= T0 + 60'000);

  // not due yet: nothing is called
  auto early = w.resend(T0 + 30'000);
  CHECK(early["counts"]["delivered"] == 0);
  CHECK(early["counts"]["rescheduled"] == 0);
  CHECK(w.ep.seen().size() == 1);

  w.ep.set("timeout");
  const int64_t t1 = T0 + kMin;
  auto second = w.resend(t1);
  CHECK(second["counts"]["rescheduled"] == 1);
  CHECK(w.db.count("SELECT attempts FROM resend_bill") == 2);
  int64_t next2 = w.db.count("SELECT next_attempt_at FROM resend_bill");
  CHECK(next2 >= t1 + 96'000);  // 120 s, less up to a fifth
  CHECK(next2 <= t1 + 120'000);
  CHECK(w.db.count("SELECT count(*) FROM grants WHERE state = 'delayed_resend'") == 1);

  w.ep.set("ok");
  auto third = w.resend(t1 + 2 * kMin);
  CHECK(third["counts"]["delivered"] == 1);
  auto seen = w.ep.seen();
  REQUIRE(seen.size() == 3);
  for (auto& b : seen) CHECK(b == bill);
  CHECK(w.db.count("SELECT count(*) FROM grants WHERE state = 'success' AND bill_no = $1", {bill}) == 1);
  CHECK(w.db.count("SELECT count(*) FROM delivery_bill") == 1);
  CHECK(w.db.count("SELECT count(*) FROM resend_bill WHERE state = 'done'") == 1);
  CHECK(w.stock() == 4);  // delivered: nothing goes back
  // and a later run finds nothing to do
  auto after = w.resend(t1 + 60 * kMin);
  CHECK(after["counts"]["delivered"] == 0);
  CHECK(w.ep.seen().size() == 3);
}

TEST_CASE("resend: a grant left in init by a claim that never delivered is delivered by the next run after the grace period") {
  World w(false);  // ledger channel
  auto g = w.claim("u1", "b1", T0, {"--no-deliver"});
  REQUIRE(g["state"] == "init");
  auto soon = w.resend(T0 + kMin);
  CHECK(soon["counts"]["delivered"] == 0);
  CHECK(w.db.count("SELECT count(*) FROM grants WHERE state = 'init'") == 1);
  auto dry = w.resend(T0 + 6 * kMin, {"--dry-run"});
  CHECK(dry["counts"]["stranded"] == 1);
  CHECK(w.db.count("SELECT count(*) FROM grants WHERE state = 'init'") == 1);
  auto later = w.resend(T0 + 6 * kMin);
  CHECK(later["counts"]["delivered"] == 1);
  CHECK(w.db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 1);
  CHECK(w.db.count("SELECT count(*) FROM ledger_entry WHERE kind = 'credit'") == 1);
  CHECK(w.resend(T0 + 7 * kMin)["counts"]["delivered"] == 0);
  CHECK(w.db.count("SELECT count(*) FROM ledger_entry") == 1);
}

TEST_CASE("resend: the channel's final no fails the grant and gives back stock, budget and limit count once") {
  World w;
  w.ep.set("final");
  auto g = w.claim("u1", "b1", T0);
  REQUIRE(g["state"] == "failed");
  CHECK(w.stock() == 5);
  CHECK(w.budget() == 0);
  CHECK(w.limits() == 0);
  CHECK(w.releases() == 1);
  auto show = rt::last_json(w.db.ok({"record", "show", g["record_code"], "-o", "json"}, 0, w.env));
  REQUIRE(show.contains("released"));
  CHECK(show["released"].get<std::string>().find("released stock 1 to bucket 0, budget 100 cents, limit counts") == 0);
  // nothing can release it again: not resend, not abandon
  w.resend(T0 + 10 * kMin);
  auto ab = w.db.ok({"resend", "abandon", g["bill_no"], "--reason", "x", "--yes", "-o", "json"}, 1, w.at(T0));
  CHECK(rt::last_json(ab)["changed"] == false);
  CHECK(w.stock() == 5);
  CHECK(w.budget() == 0);
  CHECK(w.releases() == 1);
  // the limit count came back: the same user may claim again
  w.ep.set("ok");
  CHECK(w.claim("u1", "b2", T0 + kMin)["state"] == "success");
  CHECK(w.stock() == 4);
}

TEST_CASE("resend: abandon fails the grant and releases once, also when two operators abandon at once") {
  World w;
  w.ep.set("retry");
  auto g = w.claim("u1", "b1", T0);
  REQUIRE(g["state"] == "delayed_resend");
  const std::string bill = g["bill_no"];
  CHECK(w.stock() == 4);
  CHECK(w.budget() == 100);
  auto pending = rt::lines(w.db.ok({"resend", "list", "--state", "pending", "-o", "json"}, 0, w.env).out);
  REQUIRE(pending.size() == 1);
  CHECK(json::parse(pending[0])["bill_no"] == bill);
  CHECK(json::parse(pending[0])["grant_state"] == "delayed_resend");

  // bad input: refused at the edge with 64, nothing written
  w.db.ok({"resend", "abandon", bill, "--reason", "", "--yes"}, 64, w.at(T0));
  auto bad = w.db.ok({"resend", "abandon", bill, "--reason", "\xff\xfe bad", "--yes"}, 64, w.at(T0));
  CHECK(bad.err.find("--reason is not valid UTF-8") != std::string::npos);
  w.db.ok({"resend", "abandon", std::string(300, 'B'), "--reason", "x", "--yes"}, 64, w.at(T0));
  w.db.ok({"resend", "list", "--activity", "\xc3("}, 64, w.at(T0));
  auto dry = rt::last_json(w.db.ok({"resend", "abandon", bill, "--reason", "user closed account", "--dry-run", "-o", "json"}, 0, w.at(T0)));
  CHECK(dry["changed"] == true);
  CHECK(w.stock() == 4);
  CHECK(w.releases() == 0);
  CHECK(w.db.count("SELECT count(*) FROM grants WHERE state = 'delayed_resend'") == 1);
  // irreversible: without a terminal to ask on, --yes is required (64, nothing changed)
  auto no_yes = w.db.ok({"resend", "abandon", bill, "--reason", "user closed account"}, 64, w.at(T0));
  CHECK(no_yes.err.find("resend abandon cannot be undone") != std::string::npos);
  CHECK(w.releases() == 0);
  CHECK(w.db.count("SELECT count(*) FROM grants WHERE state = 'delayed_resend'") == 1);

  rt::Run a, b;
  std::thread t1([&] { a = w.db.rc({"resend", "abandon", bill, "--reason", "user closed account", "--yes"}, w.at(T0)); });
  std::thread t2([&] { b = w.db.rc({"resend", "abandon", bill, "--reason", "user closed account", "--yes"}, w.at(T0)); });
  t1.join();
  t2.join();
  INFO(a.all() << b.all());
  CHECK(((a.rc == 0 && b.rc == 1) || (a.rc == 1 && b.rc == 0)));
  CHECK(w.db.count("SELECT count(*) FROM grants WHERE state = 'failed' AND reason = 'abandoned: user closed account'") == 1);
  CHECK(w.db.count("SELECT count(*) FROM resend_bill WHERE state = 'done'") == 1);
  CHECK(w.stock() == 5);
  CHECK(w.budget() == 0);
  CHECK(w.limits() == 0);
  CHECK(w.releases() == 1);
  CHECK(w.db.count("SELECT count(*) FROM audit WHERE action = 'resend.abandon'") == 1);
  // abandoned is final: a resend run does not call the endpoint again
  w.ep.set("ok");
  w.resend(T0 + 24 * 60 * kMin);
  CHECK(w.ep.seen().size() == 1);
  CHECK(w.db.count("SELECT count(*) FROM resend_bill WHERE state = 'done'") == 1);
  auto done = rt::lines(w.db.ok({"resend", "list", "--state", "done", "-o", "json"}, 0, w.env).out);
  CHECK(done.size() == 1);
}

TEST_CASE("resend: past its expiry a bill goes to manual, and resend retry brings it back") {
  World w;
  w.ep.set("retry");
  auto g = w.claim("u1", "b1", T0);
  const std::string bill = g["bill_no"];
  auto r = w.resend(T0 + 6 * 24 * 60 * kMin);  // past the 5-day expiry
  CHECK(r["counts"]["manual"] == 1);
  CHECK(r["counts"]["delivered"] == 0);
  CHECK(w.ep.seen().size() == 1);  // no call: an operator decides now
  auto manual = rt::lines(w.db.ok({"resend", "list", "--state", "manual", "-o", "json"}, 0, w.env).out);
  REQUIRE(manual.size() == 1);
  CHECK(json::parse(manual[0])["bill_no"] == bill);
  CHECK(w.db.count("SELECT count(*) FROM status_log WHERE entity = 'resend_bill' AND to_state = 'manual'") == 1);
  // manual bills wait for the operator: another run leaves it alone
  CHECK(w.resend(T0 + 7 * 24 * 60 * kMin)["counts"]["manual"] == 0);

  const int64_t t = T0 + 8 * 24 * 60 * kMin;
  w.db.ok({"resend", "retry", bill, "--dry-run"}, 0, w.at(t));
  CHECK(w.db.count("SELECT count(*) FROM resend_bill WHERE state = 'manual'") == 1);
  auto rr = rt::last_json(w.db.ok({"resend", "retry", bill, "-o", "json"}, 0, w.at(t)));
  CHECK(rr["state"] == "pending");
  w.ep.set("ok");
  CHECK(w.resend(t)["counts"]["delivered"] == 1);
  CHECK(w.db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 1);
  auto seen = w.ep.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == bill);
  w.db.ok({"resend", "retry", "B-no-such-bill"}, 67, w.at(t));
}

TEST_CASE("resend: two concurrent runs deliver each bill exactly once") {
  World w(true, 100);
  w.ep.set("retry");
  {
    auto box = rt::engine(w.db, T0, webhook_engine_options(w.cfg));
    for (int i = 0; i < 30; ++i) {
      auto o = rt::claim(*box.engine, "act", "c" + std::to_string(i), "cb" + std::to_string(i));
      REQUIRE(o.status == rc::engine::Status::granted);
      REQUIRE(o.grant->state == rc::GrantState::delayed_resend);
    }
  }
  REQUIRE(w.ep.seen().size() == 30);
  w.ep.set("ok");
  {
    std::lock_guard<std::mutex> l(w.ep.mu);
    w.ep.ok_delay_ms = 20;  // the runs overlap for certain
  }
  rt::Run a, b;
  std::thread t1([&] { a = w.db.rc({"resend", "-o", "json", "--chunk-size", "4"}, w.at(T0 + 60 * kMin)); });
  std::thread t2([&] { b = w.db.rc({"resend", "-o", "json", "--chunk-size", "4"}, w.at(T0 + 60 * kMin)); });
  t1.join();
  t2.join();
  INFO(a.all() << b.all());
  REQUIRE(a.rc == 0);
  REQUIRE(b.rc == 0);
  CHECK(rt::last_json(a)["counts"]["delivered"].get<int64_t>() + rt::last_json(b)["counts"]["delivered"].get<int64_t>() == 30);
  auto seen = w.ep.seen();
  REQUIRE(seen.size() == 60);
  std::map<std::string, int> calls;
  for (size_t i = 30; i < seen.size(); ++i) ++calls[seen[i]];
  CHECK(calls.size() == 30);
  for (auto& [bill, n] : calls) CHECK(n == 1);
  CHECK(w.db.count("SELECT count(*) FROM grants WHERE state = 'success'") == 30);
  CHECK(w.db.count("SELECT count(*) FROM resend_bill WHERE state = 'done'") == 30);
  CHECK(w.db.count("SELECT count(*) FROM delivery_bill") == 30);
  CHECK(w.db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND to_state = 'success'") == 30);
}
