// The budget ladder (engine/budget_ladder.hpp) on the backend under test, through the real binary
// and through in-process engines on their own connections: the three steps with exact counts of
// degraded grants and budget_exhausted answers, one move (one status-log row, one log line, one
// alert) however many claims cross a threshold at once, a raise that undoes a step, and lint
// findings naming file, line and field. The harness reconciles the books at the end of each test.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/alert_sink.hpp"
#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

const std::map<std::string, std::string> kNoReview{{"REWARDCTL_REVIEW_REQUIRED", "false"}};

// A direct activity: "small" (100 cents), "big" (300 cents, high value), "free" (costs nothing).
// Budget 1000 cents: warn from 500, degrade from 700, stop from 900.
Spec direct_ladder() {
  Spec s;
  s.budget = 1000;
  s.custom_prizes = true;
  s.item_kind = "cash";
  s.unit_cost = 1;
  s.extra =
      "[items.nothing]\nkind = \"virtual\"\nunit_cost_cents = 0\nchannel = \"ledger\"\n"
      "[[prizes]]\ncode = \"small\"\nitem = \"thing\"\namount = 100\nstock = 100\n"
      "[[prizes]]\ncode = \"big\"\nitem = \"thing\"\namount = 300\nstock = 100\nhigh_value = true\n"
      "[[prizes]]\ncode = \"free\"\nitem = \"nothing\"\namount = 1\nstock = 100\n"
      "[budget]\nwarn_at = 0.5\ndegrade_at = 0.7\nstop_at = 0.9\n";
  return s;
}

// A lottery whose draws are decided by guarantees, so that the counts are exact: a user's 1st draw
// is "big" (100 cents, high value), the 2nd "mid" (100 cents), anything else a weighted draw.
// Budget 1000 cents: warn from 200, degrade from 500, stop from 900.
Spec lottery_ladder() {
  Spec s;
  s.kind = "lottery";
  s.budget = 1000;
  s.custom_prizes = true;
  s.item_kind = "cash";
  s.unit_cost = 1;
  s.extra =
      "[items.nothing]\nkind = \"virtual\"\nunit_cost_cents = 0\nchannel = \"ledger\"\n"
      "[[prizes]]\ncode = \"big\"\nitem = \"thing\"\namount = 100\nstock = 100\nweight = 1\nhigh_value = true\n"
      "[[prizes]]\ncode = \"mid\"\nitem = \"thing\"\namount = 100\nstock = 100\nweight = 1\n"
      "[[prizes]]\ncode = \"thanks\"\nitem = \"nothing\"\namount = 1\nstock = 1000\nweight = 1\n"
      "[lottery]\nconsolation = \"thanks\"\n"
      "[[lottery.guarantees]]\nnth = 1\nprize = \"big\"\n"
      "[[lottery.guarantees]]\nnth = 2\nprize = \"mid\"\n"
      "[budget]\nwarn_at = 0.2\ndegrade_at = 0.5\nstop_at = 0.9\n";
  return s;
}

json claim(const TestDb& db, const std::string& user, const std::string& biz, const std::string& prize = "",
           int rc = -1, const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> a{"claim", "act", "--user", user, "--biz-id", biz, "-o", "json"};
  if (!prize.empty()) a.insert(a.end(), {"--prize", prize});
  auto r = rc < 0 ? db.rc(a, env) : db.ok(a, rc, env);
  INFO(r.all());
  return last_json(r);
}

std::string outcome(const json& j) {
  return j["outcome"].get<std::string>() + (j.contains("reason") ? ":" + j["reason"].get<std::string>() : "");
}

// The budget's status-log rows, oldest first, as "from->to".
std::vector<std::string> moves(const TestDb& db) {
  auto st = db.open();
  auto r = st->query("SELECT from_state, to_state FROM status_log WHERE entity = 'budget' ORDER BY id");
  std::vector<std::string> out;
  for (auto& row : r.rows) out.push_back(row.str(0) + "->" + row.str(1));
  return out;
}

std::string step(const TestDb& db) {
  return db.open()->query("SELECT ladder_step FROM budget")[0].str(0);
}

}  // namespace

TEST_CASE("ladder: a direct activity through warn, degrade and stop, with exact answers, log lines and alerts") {
  TestDb db;
  db.migrate();
  seed(db, direct_ladder());
  AlertSink sink;
  const auto env = sink.env(db);
  int n = 0;
  auto next = [&] { return "b" + std::to_string(++n); };

  // normal: 4 x small = 400 of 1000
  for (int i = 0; i < 4; ++i) CHECK(outcome(claim(db, "u" + std::to_string(i), next(), "small", 0, env)) == "granted");
  CHECK(step(db) == "normal");
  // the 5th small reaches 500: warn, with one WARN line (on that claim) and one alert
  auto r = db.ok({"claim", "act", "--user", "u4", "--biz-id", next(), "--prize", "small"}, 0, env);
  CHECK(r.err.find("warning: budget ladder of act: normal -> warn (consumed 500 of 1000 cents, 50.00%; warn_at 0.5)") !=
        std::string::npos);
  CHECK(step(db) == "warn");
  // still granted in warn, and no second line: big takes it to 800, degrade
  auto quiet = db.ok({"claim", "act", "--user", "u5", "--biz-id", next(), "--prize", "free"}, 0, env);
  CHECK(quiet.err.find("budget ladder") == std::string::npos);
  CHECK(outcome(claim(db, "u6", next(), "big", 0, env)) == "granted");
  CHECK(step(db) == "degrade");
  // degrade: the high-value prize is refused, the others are not
  CHECK(outcome(claim(db, "u7", next(), "big", 1, env)) == "rejected:budget_exhausted");
  CHECK(outcome(claim(db, "u8", next(), "big", 1, env)) == "rejected:budget_exhausted");
  CHECK(outcome(claim(db, "u9", next(), "free", 0, env)) == "granted");
  // the dry run of a claim that would reach stop moves nothing
  db.ok({"claim", "act", "--user", "u10", "--biz-id", "dry", "--prize", "small", "--dry-run"}, 0, env);
  CHECK(step(db) == "degrade");
  CHECK(outcome(claim(db, "u10", next(), "small", 0, env)) == "granted");  // 900: stop
  CHECK(step(db) == "stop");
  // stop: every claim, even of a prize that costs nothing
  for (auto p : {"small", "big", "free", "small"})
    CHECK(outcome(claim(db, "u11", next(), p, 1, env)) == "rejected:budget_exhausted");

  CHECK(db.count("SELECT consumed_cents FROM budget") == 900);
  CHECK(db.count("SELECT count(*) FROM grants") == 9);  // 6 small, 1 big, 2 free
  CHECK(moves(db) == std::vector<std::string>{"normal->warn", "warn->degrade", "degrade->stop"});
  auto alerts = sink.seen();
  REQUIRE(alerts.size() == 3);
  CHECK(sink.bad_signatures == 0);
  CHECK(alerts[0]["alert"] == "budget_ladder");
  CHECK(alerts[0]["activity"] == "act");
  CHECK(alerts[0]["from"] == "normal");
  CHECK(alerts[0]["to"] == "warn");
  CHECK(alerts[0]["consumed_cents"] == 500);
  CHECK(alerts[0]["warn_at"] == 0.5);
  CHECK(alerts[1]["to"] == "degrade");
  CHECK(alerts[2]["to"] == "stop");

  // activity show: the step, the ratio and the thresholds, in JSON and in text
  auto show = last_json(db.ok({"activity", "show", "act", "-o", "json"}));
  CHECK(show["budget_step"] == "stop");
  CHECK(show["budget_ratio"] == 0.9);
  CHECK(show["budget_warn_at"] == 0.5);
  CHECK(show["budget_degrade_at"] == 0.7);
  CHECK(show["budget_stop_at"] == 0.9);
  bool big_high = false;
  for (auto& p : show["prizes"])
    if (p["prize"] == "big") big_high = p["high_value"];
  CHECK(big_high);
  auto text = db.ok({"activity", "show", "act"});
  CHECK(text.out.find("budget_step") != std::string::npos);
  CHECK(text.out.find("stop") != std::string::npos);
  CHECK(text.out.find("HIGH_VALUE") != std::string::npos);
}

TEST_CASE("ladder: a lottery degrades high-value draws to the consolation prize, then stops") {
  TestDb db;
  db.migrate();
  seed(db, lottery_ladder());
  // 1st draws of u1..u5: big x5 = 500 (warn at u2's 200, degrade at u5's 500)
  for (int i = 1; i <= 5; ++i) {
    auto j = claim(db, "u" + std::to_string(i), "d1-" + std::to_string(i), "", 0);
    CHECK(j["prize"] == "big");
    CHECK_FALSE(j.contains("degraded_from"));
  }
  CHECK(moves(db) == std::vector<std::string>{"normal->warn", "warn->degrade"});
  // 1st draws of u6..u8 land on big too, and fall to the consolation prize
  for (int i = 6; i <= 8; ++i) {
    auto j = claim(db, "u" + std::to_string(i), "d1-" + std::to_string(i), "", 0);
    CHECK(j["prize"] == "thanks");
    CHECK(j["degraded_from"] == "big");
    CHECK(j["reason"] == "budget_degrade");
  }
  // 2nd draws of u1..u4: mid (not high value) x4 = 900: stop at u4's
  for (int i = 1; i <= 4; ++i) CHECK(claim(db, "u" + std::to_string(i), "d2-" + std::to_string(i), "", 0)["prize"] == "mid");
  CHECK(step(db) == "stop");
  // stop: a draw of mid, and a draw of big, are refused - the consolation prize too
  CHECK(outcome(claim(db, "u5", "d2-5", "", 1)) == "rejected:budget_exhausted");
  CHECK(outcome(claim(db, "u9", "d1-9", "", 1)) == "rejected:budget_exhausted");

  CHECK(db.count("SELECT count(*) FROM grants g JOIN prize p ON p.id = g.degraded_from "
                 "WHERE p.code = 'big' AND g.reason = 'budget_degrade'") == 3);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'grant' AND reason = 'budget_degrade'") == 3);
  CHECK(db.count("SELECT count(*) FROM grants") == 12);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 900);
  CHECK(moves(db) == std::vector<std::string>{"normal->warn", "warn->degrade", "degrade->stop"});
}

TEST_CASE("ladder: 16 concurrent claimers crossing every threshold move each step exactly once") {
  TestDb db;
  db.migrate();
  // 100 claims of 10 cents fill the budget of 1000: warn from 500, degrade from 700 (nothing is
  // high value: no refusals), stop from 900 - the last 10 fitting claims are refused at stop.
  Spec s;
  s.budget = 1000;
  s.item_kind = "cash";
  s.unit_cost = 1;
  s.amount = 10;
  s.stock = 1000;
  s.buckets = 4;
  s.extra = "[budget]\nwarn_at = 0.5\ndegrade_at = 0.7\nstop_at = 0.9\n";
  seed(db, s);
  std::atomic<int> announced{0}, granted{0}, exhausted{0}, other{0};
  std::mutex mu;
  std::vector<std::string> hooks;
  std::vector<std::thread> ts;
  for (int w = 0; w < 16; ++w)
    ts.emplace_back([&, w] {
      rc::engine::EngineOptions o;
      o.post_alert = [&](const json& body) {
        ++announced;
        std::lock_guard<std::mutex> l(mu);
        hooks.push_back(body["to"].get<std::string>());
        return true;
      };
      auto box = engine(db, std::nullopt, o);
      for (int i = 0; i < 8; ++i) {
        auto out = rt::claim(*box.engine, "act", "w" + std::to_string(w) + "-" + std::to_string(i),
                             "c" + std::to_string(w) + "-" + std::to_string(i));
        if (out.status == rc::engine::Status::granted) ++granted;
        else if (out.reason == rc::engine::Reason::budget_exhausted) ++exhausted;
        else ++other;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(granted == 90);
  CHECK(exhausted == 128 - 90);
  CHECK(other == 0);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 900);
  CHECK(moves(db) == std::vector<std::string>{"normal->warn", "warn->degrade", "degrade->stop"});
  CHECK(announced == 3);
  std::sort(hooks.begin(), hooks.end());
  CHECK(hooks == std::vector<std::string>{"degrade", "stop", "warn"});
  CHECK(db.count("SELECT count(*) FROM alert_outbox WHERE kind = 'budget_ladder' AND state = 'sent'") == 3);
}

TEST_CASE("ladder: a budget raise undoes the steps it brings the ratio back under, logged once") {
  TestDb db;
  db.migrate();
  seed(db, direct_ladder());
  for (int i = 0; i < 5; ++i) claim(db, "u" + std::to_string(i), "s" + std::to_string(i), "small", 0);
  claim(db, "u5", "b0", "big", 0);  // 800: degrade
  CHECK(step(db) == "degrade");
  CHECK(outcome(claim(db, "u6", "b1", "big", 1)) == "rejected:budget_exhausted");

  // a dry run changes nothing
  db.ok({"activity", "budget", "act", "--raise", "1000", "--reason", "more", "--dry-run"}, 0, kNoReview);
  CHECK(step(db) == "degrade");
  // 800 of 2000 = 40%: back to normal, one status-log row, one INFO line
  auto r = db.ok({"activity", "budget", "act", "--raise", "1000", "--reason", "day-2 demand", "-o", "json"}, 0,
                 kNoReview);
  CHECK(last_json(r)["message"].get<std::string>().find("budget ladder degrade -> normal") != std::string::npos);
  CHECK(r.err.find("info: budget ladder of act: degrade -> normal (consumed 800 of 2000 cents, 40.00%; back under "
                   "degrade_at 0.7)") != std::string::npos);
  CHECK(step(db) == "normal");
  CHECK(moves(db) == std::vector<std::string>{"normal->warn", "warn->degrade", "degrade->normal"});
  // the thresholds follow the new budget: big is granted again, and 1100 of 2000 is past warn (1000)
  CHECK(outcome(claim(db, "u6", "b2", "big", 0)) == "granted");
  CHECK(step(db) == "warn");
  // a budget set lower moves it up again (1100 of 1200 = 91.7%: stop), logged as a WARN
  auto down = db.ok({"activity", "budget", "act", "--set", "1200", "--reason", "cut"}, 0, kNoReview);
  CHECK(down.err.find("warning: budget ladder of act: warn -> stop") != std::string::npos);
  CHECK(step(db) == "stop");
  CHECK(outcome(claim(db, "u7", "s9", "free", 1)) == "rejected:budget_exhausted");
  CHECK(moves(db) == std::vector<std::string>{"normal->warn", "warn->degrade", "degrade->normal", "normal->warn",
                                              "warn->stop"});
  auto show = last_json(db.ok({"activity", "show", "act", "-o", "json"}));
  CHECK(show["budget_step"] == "stop");
  CHECK(show["budget_cents"] == 1200);
}

TEST_CASE("ladder: a new definition version with other ratios moves the step where the new thresholds put it") {
  TestDb db;
  db.migrate();
  seed(db, direct_ladder());
  for (int i = 0; i < 6; ++i) claim(db, "u" + std::to_string(i), "s" + std::to_string(i), "small", 0);  // 600: warn
  CHECK(step(db) == "warn");
  // version 2: warn at 0.65, degrade at 0.8, stop at 0.95 - 600 of 1000 is under every one of them
  Spec v2 = direct_ladder();
  v2.extra.replace(v2.extra.find("[budget]"), std::string::npos, "[budget]\nwarn_at = 0.65\ndegrade_at = 0.8\nstop_at = 0.95\n");
  auto f = write_file(db.dir(), "v2.toml", definition(v2));
  db.ok({"activity", "update", "-f", f, "--operator", "dave"});
  CHECK(step(db) == "warn");  // version 1 keeps running until the review switches
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  auto sw = db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
  INFO(sw.all());
  CHECK(step(db) == "normal");
  CHECK(moves(db) == std::vector<std::string>{"normal->warn", "warn->normal"});
  CHECK(db.count("SELECT warn_cents FROM budget") == 650);
  CHECK(db.count("SELECT stop_cents FROM budget") == 950);
  // the new thresholds decide: 700 is past warn (650), not yet degrade (800); big (300) is granted
  // at 700, and 1000 is past stop
  CHECK(outcome(claim(db, "u6", "s6", "small", 0)) == "granted");
  CHECK(step(db) == "warn");
  CHECK(outcome(claim(db, "u7", "b7", "big", 0)) == "granted");
  CHECK(step(db) == "stop");
  CHECK(outcome(claim(db, "u8", "f8", "free", 1)) == "rejected:budget_exhausted");
  CHECK(moves(db) == std::vector<std::string>{"normal->warn", "warn->normal", "normal->warn", "warn->stop"});

  // version 3 drops the ladder: its thresholds go too, and the step is normal again
  Spec v3 = direct_ladder();
  v3.extra.erase(v3.extra.find("[budget]"));
  db.ok({"activity", "update", "-f", write_file(db.dir(), "v3.toml", definition(v3)), "--operator", "dave"});
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "carol"});
  CHECK(db.count("SELECT count(*) FROM budget WHERE warn_ppm IS NULL AND warn_cents IS NULL AND degrade_cents IS NULL "
                 "AND stop_cents IS NULL") == 1);
  CHECK(step(db) == "normal");
}

TEST_CASE("ladder: a high-value draw past degrade is recorded budget_degrade even when its cost no longer fits") {
  TestDb db;
  db.migrate();
  // big costs 400: after two of them (800 of 1000, past degrade at 500, under stop at 900) a third
  // would not fit the budget either - it is still the degrade step that switched it off
  Spec s = lottery_ladder();
  s.extra.replace(s.extra.find("amount = 100\nstock = 100\nweight = 1\nhigh_value"), 12, "amount = 400");
  s.extra.replace(s.extra.find("warn_at = 0.2"), 13, "warn_at = 0.3");
  seed(db, s);
  CHECK(claim(db, "u1", "d1", "", 0)["prize"] == "big");
  CHECK(claim(db, "u2", "d2", "", 0)["prize"] == "big");
  CHECK(db.count("SELECT consumed_cents FROM budget") == 800);
  auto j = claim(db, "u3", "d3", "", 0);
  CHECK(j["prize"] == "thanks");
  CHECK(j["degraded_from"] == "big");
  CHECK(j["reason"] == "budget_degrade");
}

TEST_CASE("ladder: list-issue plan counts only the grants the ladder allows before it stops") {
  TestDb db;
  db.migrate();
  seed(db, direct_ladder());
  std::string csv = "user_id\n";
  for (int i = 0; i < 10; ++i) csv += "l" + std::to_string(i) + "\n";
  const auto ten = write_file(db.dir(), "ten.csv", csv);
  auto plan = [&](const std::string& prize, const std::string& file, std::vector<std::string> extra, int rc) {
    std::vector<std::string> a{"list-issue", "plan", "act", file, "--prize", prize, "-o", "json", "--operator", "alice"};
    a.insert(a.end(), extra.begin(), extra.end());
    auto r = db.ok(a, rc);
    INFO(r.all());
    return std::make_pair(last_json(r), r.err);
  };
  // 10 x 100 cents is exactly the authorised 1000, but stop_at 0.9 refuses every take from 900 on:
  // 9 grants fit, not 10 - refused, nothing stored
  auto [j, err] = plan("small", ten, {}, 65);
  CHECK(j["budget_left"] == 1000);
  CHECK(j["budget_grants"] == 9);
  CHECK(j["fits"] == false);
  CHECK(err.find("room for 9 grants") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM list_batch") == 0);
  // the high-value prize stops at degrade_at (700): after 400 consumed, only a take starting at 400
  for (int i = 0; i < 4; ++i) claim(db, "u" + std::to_string(i), "s" + std::to_string(i), "small", 0);
  CHECK(plan("big", ten, {"--dry-run"}, 65).first["budget_grants"] == 1);
  // a prize that costs nothing is not limited by the budget until stop
  CHECK(plan("free", ten, {"--dry-run"}, 0).first["budget_grants"].is_null());
  // --allow-partial stores it; the run issues what the ladder allows (5 more: 400 -> 900) and
  // rejects the rest as budget_exhausted
  auto b = plan("small", ten, {"--allow-partial"}, 0).first["batch"].get<std::string>();
  db.ok({"list-issue", "approve", b, "--operator", "bob"});
  db.ok({"list-issue", "run", b, "--progress", "none"}, 3);
  CHECK(db.count("SELECT count(*) FROM list_item WHERE state = 'issued'") == 5);
  CHECK(db.count("SELECT count(*) FROM list_item WHERE state = 'rejected' AND reason = 'budget_exhausted'") == 5);
  CHECK(db.count("SELECT consumed_cents FROM budget") == 900);
  CHECK(step(db) == "stop");
  // a budget near INT64_MAX: the count of grants it allows is computed without overflow
  db.ok({"activity", "budget", "act", "--set", "9223372036854775000", "--reason", "huge"}, 0, kNoReview);
  auto [h, herr] = plan("small", ten, {"--dry-run"}, 0);
  CHECK(h["budget_grants"].get<int64_t>() > 1'000'000'000'000'000LL);
  CHECK(h["fits"] == true);
}

TEST_CASE("ladder: lint refuses bad thresholds naming file, line and field, and stores nothing") {
  TestDb db;
  db.migrate();
  const std::string base = definition(direct_ladder());
  auto with_budget = [&](const std::string& table) {
    std::string t = base;
    t.replace(t.find("[budget]"), std::string::npos, table);
    return t;
  };
  struct Case {
    std::string table, code, field;
  };
  const std::vector<Case> cases = {
      {"[budget]\nwarn_at = 0\n", "bad_value", "budget.warn_at"},
      {"[budget]\nwarn_at = 1.5\n", "bad_value", "budget.warn_at"},
      {"[budget]\nwarn_at = nan\n", "bad_value", "budget.warn_at"},
      {"[budget]\nstop_at = inf\n", "bad_value", "budget.stop_at"},
      {"[budget]\nstop_at = -0.5\n", "bad_value", "budget.stop_at"},
      {"[budget]\ndegrade_at = \"0.9\"\n", "wrong_type", "budget.degrade_at"},
      {"[budget]\ndegrade_at = 1e300\n", "bad_value", "budget.degrade_at"},
      {"[budget]\nwarn_at = 99999999999999999\n", "bad_value", "budget.warn_at"},
      {"[budget]\nwarn_at = 0.0000000001\n", "bad_value", "budget.warn_at"},
      {"[budget]\nwarn_at = 0.9\ndegrade_at = 0.8\n", "ladder_order", "budget.degrade_at"},
      {"[budget]\ndegrade_at = 0.9\nstop_at = 0.5\n", "ladder_order", "budget.stop_at"},
      {"[budget]\nwarn_at = 0.9\nstop_at = 0.5\n", "ladder_order", "budget.stop_at"},
      {"[budget]\nwarm_at = 0.9\n", "unknown_key", "budget.warm_at"},
  };
  for (auto& c : cases) {
    CAPTURE(c.table);
    const std::string text = with_budget(c.table);
    const std::string f = write_file(db.dir(), "bad.toml", text);
    // the line of the offending key ("budget.warn_at" is the line that starts "warn_at =")
    const std::string key = c.field.substr(c.field.find('.') + 1) + " =";
    int line = 0, n = 0;
    for (size_t i = 0; i < text.size(); i = text.find('\n', i) + 1) {
      ++n;
      if (text.compare(i, key.size(), key) == 0) line = n;
      if (text.find('\n', i) == std::string::npos) break;
    }
    REQUIRE(line > 0);
    auto r = db.ok({"activity", "lint", f}, 1);
    INFO(r.all());
    CHECK(r.out.find(f + ":" + std::to_string(line) + ":") != std::string::npos);
    CHECK(r.out.find(c.code) != std::string::npos);
    CHECK(r.out.find(c.field) != std::string::npos);
    db.ok({"activity", "create", "-f", f}, 65);
  }
  CHECK(db.count("SELECT count(*) FROM activity") == 0);
  // a ladder without a budget to measure, and a high-value consolation prize
  Spec nb = direct_ladder();
  nb.budget.reset();
  nb.item_kind = "coupon";
  auto r = db.ok({"activity", "lint", write_file(db.dir(), "nb.toml", definition(nb))}, 1);
  CHECK(r.out.find("ladder_without_budget") != std::string::npos);
  Spec hc = lottery_ladder();
  hc.extra.replace(hc.extra.find("weight = 1\n[lottery]"), 10, "weight = 1\nhigh_value = true");
  auto r2 = db.ok({"activity", "lint", write_file(db.dir(), "hc.toml", definition(hc))}, 1);
  CHECK(r2.out.find("high_value_consolation") != std::string::npos);
  CHECK(r2.out.find("prizes[2].high_value") != std::string::npos);
  // the ratio 1 may be written as an integer
  Spec one = direct_ladder();
  one.extra.replace(one.extra.find("stop_at = 0.9"), 13, "stop_at = 1");
  db.ok({"activity", "lint", write_file(db.dir(), "one.toml", definition(one))}, 0);
}
