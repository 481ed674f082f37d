// definition.cpp (parse_definition, review_definition) and lint.cpp: one fixture per finding, the
// templates and the examples. No database.
#include <doctest/doctest.h>

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "core/activity/definition.hpp"
#include "core/embedded.hpp"

using namespace rc;
using namespace rc::activity;

namespace {

// The source tree, from this file's own path (CMake compiles it by absolute path).
std::string source_dir() {
  std::string f = __FILE__;
  return f.substr(0, f.rfind("/tests/unit/"));
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot read " << path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> toml_files(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".toml") out.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

const LintContext kDefault{{"ledger", "outbox"}};

Parsed review(const std::string& text, const LintContext& ctx = kDefault) { return review_definition(text, "t.toml", ctx); }

// The first finding with this code (and path, when given), or nullptr.
const Finding* find(const Parsed& p, const std::string& code, const std::string& path = "") {
  for (auto& f : p.findings)
    if (f.code == code && (path.empty() || f.path == path)) return &f;
  return nullptr;
}

std::string dump(const Parsed& p) {
  std::string s;
  for (auto& f : p.findings)
    s += std::string(severity_name(f.severity)) + " " + f.code + " " + f.path + " " + std::to_string(f.line) + ":" +
         std::to_string(f.column) + " " + f.message + "\n";
  return s;
}

// `text` with `from` replaced by `to`; the fixture must contain `from`.
std::string with(std::string text, const std::string& from, const std::string& to) {
  auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "fixture lacks: " << from);
  return text.replace(at, from.size(), to);
}

// Line numbers are part of the assertions below: keep these fixtures' layout.
const std::string kDirect = R"(code = "gift"
name = "Gift"
kind = "direct"
timezone = "Asia/Shanghai"
start = 2027-03-01T00:00:00+08:00
end = 2027-03-31T23:59:59+08:00
budget_cents = 100000

[items.coupon_10]
kind = "coupon"
unit_cost_cents = 1000
channel = "ledger"

[[prizes]]
code = "c10"
item = "coupon_10"
amount = 1
stock = 100
)";

// Seed 002 §2.3's pool: weights 1/50/200/749, costs 30.00 / 5.00 / 0.01 / 0 yuan.
const std::string kLottery = R"(code = "draw"
name = "Draw"
kind = "lottery"
timezone = "Asia/Shanghai"
start = 2027-03-01T00:00:00+08:00
end = 2027-03-31T23:59:59+08:00
budget_cents = 1000000

[items.free_order]
kind = "coupon"
unit_cost_cents = 3000
channel = "ledger"

[items.coupon_5]
kind = "coupon"
unit_cost_cents = 500
channel = "ledger"

[items.points]
kind = "points"
unit_cost_cents = 1
channel = "ledger"

[items.thanks]
kind = "virtual"
unit_cost_cents = 0
channel = "ledger"

[[prizes]]
code = "free_order"
item = "free_order"
amount = 1
stock = 10
weight = 1

[[prizes]]
code = "coupon_5"
item = "coupon_5"
amount = 1
stock = 1000
weight = 50

[[prizes]]
code = "points_1"
item = "points"
amount = 1
stock = 100000
weight = 200

[[prizes]]
code = "thanks"
item = "thanks"
amount = 1
stock = 10000000
weight = 749

[lottery]
consolation = "thanks"
)";

const std::string kRedpack = R"(code = "rain"
name = "Rain"
kind = "redpack"
timezone = "Asia/Shanghai"
start = 2027-02-06T20:00:00+08:00
end = 2027-02-06T23:59:59+08:00
budget_cents = 100000

[items.cash]
kind = "cash"
unit_cost_cents = 1
channel = "ledger"

[[prizes]]
code = "packet"
item = "cash"
amount_min = 10
amount_max = 100
stock = 1000
)";

}  // namespace

TEST_CASE("definition: the base fixtures review clean and parse into the Definition") {
  for (auto* t : {&kDirect, &kLottery, &kRedpack}) {
    auto p = review(*t);
    INFO(dump(p));
    CHECK_FALSE(has_errors(p.findings));
    CHECK(p.def);
  }
  auto p = parse_definition(kDirect, "t.toml");
  REQUIRE(p.def);
  const Definition& d = *p.def;
  CHECK(d.code == "gift");
  CHECK(d.kind == Kind::direct);
  CHECK(d.timezone == "Asia/Shanghai");
  CHECK(format_utc(d.start_at) == "2027-02-28T16:00:00.000Z");
  CHECK(d.budget_cents == 100000);
  CHECK_FALSE(d.whitelist_required);
  CHECK_FALSE(d.limit);
  REQUIRE(d.items.size() == 1);
  CHECK(d.items[0].path == "items.coupon_10");
  CHECK(d.items[0].unit_cost_cents == 1000);
  REQUIRE(d.prizes.size() == 1);
  CHECK(d.prizes[0].path == "prizes[0]");
  CHECK(d.prizes[0].stock_buckets == 1);  // default
  CHECK(d.max_cost_cents(d.prizes[0]) == 1000);
  CHECK(d.prize("c10") == &d.prizes[0]);
  CHECK(d.item("nope") == nullptr);

  auto r = parse_definition(kRedpack, "t.toml");
  REQUIRE(r.def);
  CHECK(r.def->prizes[0].amount == 10);
  CHECK(r.def->prizes[0].amount_max == 100);
  CHECK(r.def->max_cost_cents(r.def->prizes[0]) == 100);  // a random packet costs at most amount_max
}

TEST_CASE("definition: small helpers") {
  for (auto k : {Kind::direct, Kind::lottery, Kind::redpack}) CHECK(parse_kind(kind_name(k)) == k);
  CHECK_FALSE(parse_kind("raffle"));
  CHECK(std::string(severity_name(Severity::warning)) == "warning");
  CHECK(valid_code("zsff_2025_anniversary"));
  CHECK(valid_code("a-b_9"));
  CHECK(valid_code(std::string(64, 'a')));
  CHECK_FALSE(valid_code(std::string(65, 'a')));
  CHECK_FALSE(valid_code(""));
  CHECK_FALSE(valid_code("Spring"));
  CHECK_FALSE(valid_code("a b"));
  CHECK_FALSE(valid_code("a.b"));
  CHECK_FALSE(has_errors({Finding{"x", Severity::warning, "", "", 0, 0}}));
  CHECK(has_errors({Finding{"x", Severity::info, "", "", 0, 0}, Finding{"y", Severity::error, "", "", 0, 0}}));
}

TEST_CASE("definition: a window ending at 23:59:59+08:00 parses to 15:59:59Z") {
  SUBCASE("TOML offset date-time") {
    auto p = parse_definition(with(with(kDirect, "end = 2027-03-31T23:59:59+08:00", "end = 2025-11-30T23:59:59+08:00"),
                                   "start = 2027-03-01", "start = 2025-11-01"),
                              "t.toml");
    INFO(dump(p));
    REQUIRE(p.def);
    CHECK(format_utc(p.def->end_at) == "2025-11-30T15:59:59.000Z");
    CHECK(format_utc(p.def->start_at) == "2025-10-31T16:00:00.000Z");
  }
  SUBCASE("RFC 3339 string, with milliseconds") {
    auto p = parse_definition(with(kDirect, "end = 2027-03-31T23:59:59+08:00", "end = \"2027-03-31T23:59:59.500+08:00\""),
                              "t.toml");
    REQUIRE(p.def);
    CHECK(format_utc(p.def->end_at) == "2027-03-31T15:59:59.500Z");
  }
}

TEST_CASE("definition: malformed TOML is one syntax finding with line and column") {
  auto p = review("code = \"a\"\nname = \"b\"\nkind = = \"direct\"\n");
  REQUIRE(p.findings.size() == 1);
  CHECK(p.findings[0].code == "syntax");
  CHECK(p.findings[0].severity == Severity::error);
  CHECK(p.findings[0].path == "");
  CHECK(p.findings[0].line == 3);
  CHECK(p.findings[0].column == 8);
  CHECK(p.findings[0].message.find('\n') == std::string::npos);
  CHECK_FALSE(p.def);
  auto dup = review("[items.x]\nkind = \"cash\"\n[items.x]\n");  // a table defined twice
  REQUIRE(find(dup, "syntax"));
  CHECK(find(dup, "syntax")->line == 3);
}

TEST_CASE("definition: unknown keys are errors, with the key that was probably meant") {
  SUBCASE("misspelt prize key") {
    auto p = review(with(kLottery, "weight = 50", "wieght = 50"));
    auto* f = find(p, "unknown_key", "prizes[1].wieght");
    REQUIRE(f);
    CHECK(f->severity == Severity::error);
    CHECK(f->line == 41);
    CHECK(f->column == 1);
    CHECK(f->message.find("did you mean 'weight'?") != std::string::npos);
    CHECK_FALSE(p.def);
  }
  SUBCASE("misspelt keys in every table") {
    auto p = review(with(with(with(kLottery, "channel = \"ledger\"", "chanel = \"ledger\""), "consolation =", "consolaton ="),
                         "budget_cents", "budget_cent"));
    CHECK(find(p, "unknown_key", "items.free_order.chanel")->message.find("'channel'") != std::string::npos);
    CHECK(find(p, "unknown_key", "lottery.consolaton")->message.find("'consolation'") != std::string::npos);
    CHECK(find(p, "unknown_key", "budget_cent")->message.find("'budget_cents'") != std::string::npos);
    auto l = review(kDirect + "\n[prizes.limit]\ncount = 1\nperiode = \"day\"\n");
    CHECK(find(l, "unknown_key", "prizes[0].limit.periode")->message.find("'period'") != std::string::npos);
    auto g = review(kLottery + "\n[[lottery.guarantees]]\nnht = 3\nprize = \"coupon_5\"\n");
    CHECK(find(g, "unknown_key", "lottery.guarantees[0].nht")->message.find("'nth'") != std::string::npos);
    auto fu = review(kDirect + "\n[[fuse]]\nname = \"f\"\nwindow_second = 60\nmax_count = 5\n");
    CHECK(find(fu, "unknown_key", "fuse[0].window_second")->message.find("'window_seconds'") != std::string::npos);
  }
  SUBCASE("a top-level key below a table header") {
    auto p = review(kDirect + "whitelist_required = true\n");
    auto* f = find(p, "unknown_key", "prizes[0].whitelist_required");
    REQUIRE(f);
    CHECK(f->line == 19);
    CHECK(f->message.find("move it above the first [table] header") != std::string::npos);
  }
  SUBCASE("a key far from any known one") {
    auto p = review(with(kDirect, "budget_cents = 100000", "budget_cents = 100000\ncolour = \"red\""));
    auto* f = find(p, "unknown_key", "colour");
    REQUIRE(f);
    CHECK(f->message.find("remove it") != std::string::npos);
  }
}

TEST_CASE("definition: wrong types, and amounts given as floats") {
  struct Case {
    std::string from, to, path, says;
  };
  for (auto& c : std::vector<Case>{
           {"amount = 1", "amount = 1.5", "prizes[0].amount", "amounts are integer cents/units, not floats"},
           {"stock = 100", "stock = 10.0", "prizes[0].stock", "amounts are integer cents/units, not floats"},
           {"budget_cents = 100000", "budget_cents = 1000.00", "budget_cents", "not floats"},
           {"unit_cost_cents = 1000", "unit_cost_cents = 10.5", "items.coupon_10.unit_cost_cents", "not floats"},
           {"unit_cost_cents = 1000", "unit_cost_cents = \"1000\"", "items.coupon_10.unit_cost_cents",
            "must be an integer, not a string"},
           {"name = \"Gift\"", "name = 5", "name", "must be a string, not an integer"},
           {"budget_cents = 100000", "budget_cents = 1\nwhitelist_required = \"yes\"", "whitelist_required",
            "true or false"},
           {"[items.coupon_10]", "[[items.coupon_10]]", "items.coupon_10", "must be a table"},
           {"[[prizes]]", "[prizes]", "prizes", "array of tables"},
           {"end = 2027-03-31T23:59:59+08:00", "end = 20270331", "end", "not an integer"},
       }) {
    CAPTURE(c.to);
    auto p = review(with(kDirect, c.from, c.to));
    auto* f = find(p, "wrong_type", c.path);
    REQUIRE_MESSAGE(f, dump(p));
    CHECK(f->severity == Severity::error);
    CHECK(f->line > 0);
    CHECK(f->message.find(c.says) != std::string::npos);
    CHECK_FALSE(p.def);
  }
  auto w = review(with(kLottery, "weight = 50", "weight = 0.5"));
  REQUIRE(find(w, "wrong_type", "prizes[1].weight"));
  CHECK(find(w, "wrong_type", "prizes[1].weight")->line == 41);
  CHECK(find(w, "wrong_type", "prizes[1].weight")->message.find("weights are integers") != std::string::npos);
}

TEST_CASE("definition: negative amounts, stock, budgets and weights") {
  struct Case {
    const std::string* base;
    std::string from, to, path;
  };
  for (auto& c : std::vector<Case>{{&kDirect, "amount = 1", "amount = -1", "prizes[0].amount"},
                                   {&kDirect, "stock = 100", "stock = -100", "prizes[0].stock"},
                                   {&kDirect, "budget_cents = 100000", "budget_cents = -5", "budget_cents"},
                                   {&kDirect, "unit_cost_cents = 1000", "unit_cost_cents = -1000",
                                    "items.coupon_10.unit_cost_cents"},
                                   {&kLottery, "weight = 200", "weight = -200", "prizes[2].weight"},
                                   {&kRedpack, "amount_max = 100", "amount_max = -100", "prizes[0].amount_max"}}) {
    CAPTURE(c.to);
    auto p = review(with(*c.base, c.from, c.to));
    auto* f = find(p, "negative_amount", c.path);
    REQUIRE_MESSAGE(f, dump(p));
    CHECK(f->severity == Severity::error);
    CHECK(f->line > 0);
    CHECK_FALSE(p.def);
  }
}

TEST_CASE("definition: missing fields") {
  for (auto key : {"code", "name", "kind", "timezone", "start", "end"}) {
    CAPTURE(key);
    std::string text;  // kDirect without the top-level `key = ...` line
    std::stringstream in(kDirect);
    bool top = true;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("[", 0) == 0) top = false;
      if (top && line.rfind(std::string(key) + " = ", 0) == 0) continue;
      text += line + "\n";
    }
    auto p = review(text);
    auto* f = find(p, "missing_field", key);
    REQUIRE_MESSAGE(f, dump(p));
    CHECK(f->severity == Severity::error);
  }
  auto p = review(with(kDirect, "item = \"coupon_10\"\n", ""));
  REQUIRE(find(p, "missing_field", "prizes[0].item"));
  CHECK(find(p, "missing_field", "prizes[0].item")->line == 14);  // the [[prizes]] header
  CHECK(find(review(with(kDirect, "channel = \"ledger\"\n", "")), "missing_field", "items.coupon_10.channel"));
  CHECK(find(review(with(kRedpack, "amount_max = 100\n", "")), "missing_field", "prizes[0].amount_max"));
  auto no_prizes = review(kDirect.substr(0, kDirect.find("[[prizes]]")));
  CHECK(find(no_prizes, "missing_field", "prizes"));
  auto both = review(with(kDirect, "amount = 1", "amount = 1\namount_min = 1"));
  CHECK(find(both, "conflicting_fields", "prizes[0].amount_min"));
}

TEST_CASE("definition: codes outside [a-z0-9_-]{1,64}") {
  auto p = review(with(with(with(kDirect, "code = \"gift\"", "code = \"Spring Gift\""), "[items.coupon_10]",
                            "[items.\"Coupon 10\"]"),
                       "code = \"c10\"\nitem = \"coupon_10\"", "code = \"c10!\"\nitem = \"Coupon 10\""));
  auto* a = find(p, "bad_code", "code");
  REQUIRE_MESSAGE(a, dump(p));
  CHECK(a->line == 1);
  CHECK(a->message.find("'spring_gift'") != std::string::npos);
  CHECK(find(p, "bad_code", "items.Coupon 10"));
  auto* z = find(p, "bad_code", "prizes[0].code");
  REQUIRE(z);
  CHECK(z->line == 15);
  auto long_code = review(with(kDirect, "code = \"gift\"", "code = \"" + std::string(65, 'g') + "\""));
  CHECK(find(long_code, "bad_code", "code"));
}

TEST_CASE("definition: unknown time zone, times without an offset, bad values") {
  auto z = review(with(kDirect, "Asia/Shanghai", "Asia/Beijing"));
  REQUIRE(find(z, "unknown_timezone", "timezone"));
  CHECK(find(z, "unknown_timezone", "timezone")->line == 4);

  auto local = review(with(kDirect, "start = 2027-03-01T00:00:00+08:00", "start = 2027-03-01T00:00:00"));
  auto* f = find(local, "bad_time", "start");
  REQUIRE_MESSAGE(f, dump(local));
  CHECK(f->line == 5);
  CHECK(f->message.find("2027-03-01T00:00:00+08:00 (Asia/Shanghai)") != std::string::npos);  // names the fix

  auto ny = review(with(with(kDirect, "Asia/Shanghai", "America/New_York"), "start = 2027-03-01T00:00:00+08:00",
                        "start = \"2027-07-01T00:00:00\""));
  REQUIRE(find(ny, "bad_time", "start"));
  CHECK(find(ny, "bad_time", "start")->message.find("2027-07-01T00:00:00-04:00") != std::string::npos);

  CHECK(find(review(with(kDirect, "start = 2027-03-01T00:00:00+08:00", "start = \"next monday\"")), "bad_time", "start"));
  CHECK(find(review(with(kDirect, "start = 2027-03-01T00:00:00+08:00", "start = 2027-03-01")), "bad_time", "start"));

  auto kind = review(with(kDirect, "kind = \"direct\"", "kind = \"lotery\""));
  REQUIRE(find(kind, "bad_value", "kind"));
  CHECK(find(kind, "bad_value", "kind")->message.find("'lottery'") != std::string::npos);
  CHECK(find(review(with(kDirect, "kind = \"coupon\"", "kind = \"voucher\"")), "bad_value", "items.coupon_10.kind"));
  CHECK(find(review(kDirect + "\n[prizes.limit]\ncount = 1\nperiod = \"year\"\n"), "bad_value", "prizes[0].limit.period"));
  CHECK(find(review(kDirect + "\n[prizes.limit]\ncount = 0\n"), "bad_value", "prizes[0].limit.count"));
  CHECK(find(review(with(kDirect, "stock = 100", "stock = 100\nstock_buckets = 0")), "bad_value",
             "prizes[0].stock_buckets"));
}

TEST_CASE("definition: window_order when the end is not after the start") {
  auto p = review(with(kDirect, "end = 2027-03-31T23:59:59+08:00", "end = 2027-02-28T23:59:59+08:00"));
  auto* f = find(p, "window_order", "end");
  REQUIRE(f);
  CHECK(f->severity == Severity::error);
  CHECK(f->line == 6);
  auto same = review(with(kDirect, "end = 2027-03-31T23:59:59+08:00", "end = \"2027-02-28T16:00:00Z\""));
  CHECK(find(same, "window_order", "end"));  // equal instants: an empty window
}

// ---------------------------------------------------------------- lint: one fixture per finding

TEST_CASE("lint: unknown_item, duplicate_code, unknown_channel") {
  auto p = review(with(kDirect, "item = \"coupon_10\"", "item = \"coupon_01\""));
  auto* f = find(p, "unknown_item", "prizes[0].item");
  REQUIRE(f);
  CHECK(f->severity == Severity::error);
  CHECK(f->line == 16);
  CHECK(f->message.find("did you mean 'coupon_10'?") != std::string::npos);
  CHECK_FALSE(p.def);  // review returns no definition when any finding is an error

  auto d = review(kDirect + "\n[[prizes]]\ncode = \"c10\"\nitem = \"coupon_10\"\namount = 1\nstock = 5\n");
  REQUIRE(find(d, "duplicate_code", "prizes[1].code"));
  CHECK(find(d, "duplicate_code", "prizes[1].code")->line == 21);
  auto df = review(kDirect + "\n[[fuse]]\nname = \"f\"\nwindow_seconds = 60\nmax_count = 5\n"
                             "\n[[fuse]]\nname = \"f\"\nwindow_seconds = 60\nmax_count = 9\n");
  CHECK(find(df, "duplicate_code", "fuse[1].name"));

  auto c = review(with(kDirect, "channel = \"ledger\"", "channel = \"sms\""));
  auto* ch = find(c, "unknown_channel", "items.coupon_10.channel");
  REQUIRE(ch);
  CHECK(ch->severity == Severity::error);
  CHECK(ch->line == 12);
  CHECK(ch->message.find("ledger, outbox") != std::string::npos);
  CHECK_FALSE(find(review(with(kDirect, "channel = \"ledger\"", "channel = \"sms\""), {{"ledger", "outbox", "sms"}}),
                   "unknown_channel"));
  CHECK_FALSE(find(review(with(kDirect, "channel = \"ledger\"", "channel = \"outbox\""), {}), "unknown_channel"));
}

TEST_CASE("lint: cash_without_budget") {
  auto cash = with(with(kDirect, "budget_cents = 100000\n", ""), "kind = \"coupon\"\nunit_cost_cents = 1000",
                   "kind = \"cash\"\nunit_cost_cents = 1");
  auto p = review(cash);
  auto* f = find(p, "cash_without_budget", "budget_cents");
  REQUIRE_MESSAGE(f, dump(p));
  CHECK(f->severity == Severity::error);
  CHECK(f->message.find("'coupon_10'") != std::string::npos);
  CHECK(find(review(with(kRedpack, "budget_cents = 100000\n", "")), "cash_without_budget", "budget_cents"));
  CHECK_FALSE(find(review(with(kDirect, "budget_cents = 100000\n", "")), "cash_without_budget"));  // a coupon needs none
}

TEST_CASE("lint: lottery weights, consolation and guarantees") {
  auto w = review(with(kLottery, "weight = 200", "weight = 0"));
  auto* bw = find(w, "bad_weight", "prizes[2].weight");
  REQUIRE(bw);
  CHECK(bw->severity == Severity::error);
  CHECK(bw->line == 48);
  auto missing_weight = review(with(kLottery, "weight = 200\n", ""));
  CHECK(find(missing_weight, "bad_weight", "prizes[2].weight"));

  std::string zero = kLottery;
  for (auto from : {"weight = 1\n", "weight = 50", "weight = 200", "weight = 749"}) zero = with(zero, from, "weight = 0");
  auto z = review(zero);
  REQUIRE(find(z, "weights_zero", "prizes"));
  CHECK(find(z, "weights_zero")->severity == Severity::error);

  auto nc = review(with(kLottery, "[lottery]\nconsolation = \"thanks\"\n", ""));
  REQUIRE(find(nc, "no_consolation", "lottery.consolation"));
  CHECK(find(nc, "no_consolation")->severity == Severity::error);
  auto uc = review(with(kLottery, "consolation = \"thanks\"", "consolation = \"thank\""));
  REQUIRE(find(uc, "no_consolation", "lottery.consolation"));
  CHECK(find(uc, "no_consolation")->line == 58);
  CHECK(find(uc, "no_consolation")->message.find("did you mean 'thanks'?") != std::string::npos);

  auto g = review(kLottery + "\n[[lottery.guarantees]]\nnth = 10\nprize = \"coupon5\"\n"
                             "\n[[lottery.guarantees]]\nnth = 0\nprize = \"coupon_5\"\n"
                             "\n[[lottery.guarantees]]\nnth = 10\nprize = \"free_order\"\n");
  auto* gu = find(g, "guarantee_unknown_prize", "lottery.guarantees[0].prize");
  REQUIRE_MESSAGE(gu, dump(g));
  CHECK(gu->severity == Severity::error);
  CHECK(gu->line == 62);
  CHECK(gu->message.find("did you mean 'coupon_5'?") != std::string::npos);
  auto* bn = find(g, "guarantee_bad_nth", "lottery.guarantees[1].nth");
  REQUIRE(bn);
  CHECK(bn->line == 65);
  CHECK(find(g, "guarantee_bad_nth", "lottery.guarantees[2].nth"));  // draw 10 twice

  auto unreachable = review(with(kLottery, "budget_cents = 1000000", "budget_cents = 1000000\n[limit]\ncount = 5") +
                            "\n[[lottery.guarantees]]\nnth = 10\nprize = \"coupon_5\"\n");
  auto* un = find(unreachable, "guarantee_unreachable", "lottery.guarantees[0].nth");
  REQUIRE_MESSAGE(un, dump(unreachable));
  CHECK(un->severity == Severity::warning);

  auto km = review(kDirect + "\n[lottery]\nconsolation = \"c10\"\n");
  CHECK(find(km, "kind_mismatch", "lottery"));
  auto wi = review(with(kDirect, "stock = 100", "stock = 100\nweight = 5"));
  CHECK(find(wi, "weight_ignored", "prizes[0].weight")->severity == Severity::warning);
}

TEST_CASE("lint: expected_cost per draw and the draws the budget covers (docs/design.md §4.5)") {
  auto p = review(kLottery);
  auto* f = find(p, "expected_cost", "lottery");
  REQUIRE(f);
  CHECK(f->severity == Severity::info);
  // (1 x 3000 + 50 x 500 + 200 x 1 + 749 x 0) / 1000 = 28.2 cents; 1,000,000 / 28.2 = 35460.99 draws
  CHECK(f->message.find("(28 cents)") != std::string::npos);
  CHECK(f->message.find("about 35460 draws") != std::string::npos);
  auto nb = review(with(kLottery, "budget_cents = 1000000\n", ""));
  CHECK(find(nb, "expected_cost")->message.find("no budget_cents") != std::string::npos);
  CHECK_FALSE(find(review(kDirect), "expected_cost"));
}

TEST_CASE("lint: stock_over_budget gives both figures in yuan and cents") {
  auto p = review(with(kDirect, "stock = 100", "stock = 150"));
  auto* f = find(p, "stock_over_budget", "budget_cents");
  REQUIRE(f);
  CHECK(f->severity == Severity::warning);
  CHECK(f->line == 7);
  CHECK(f->message.find("1500.00 yuan (150000 cents)") != std::string::npos);
  CHECK(f->message.find("1000.00 yuan (100000 cents)") != std::string::npos);
  CHECK(p.def);  // warnings do not stop a definition
  CHECK_FALSE(find(review(kDirect), "stock_over_budget"));  // 100 x 10.00 yuan is exactly the budget
  // a random redpack counts at amount_max: 1000 x 100 = 100000 fits; 1001 does not
  CHECK_FALSE(find(review(kRedpack), "stock_over_budget"));
  CHECK(find(review(with(kRedpack, "stock = 1000", "stock = 1001")), "stock_over_budget"));
}

TEST_CASE("lint: the extra zero - amount_outlier, amount_over_item_max, amount_vs_unit_cost") {
  std::string three = with(kDirect, "budget_cents = 100000", "budget_cents = 100000000") +
                      "\n[[prizes]]\ncode = \"c20\"\nitem = \"coupon_10\"\namount = 2\nstock = 10\n"
                      "\n[[prizes]]\ncode = \"c100\"\nitem = \"coupon_10\"\namount = 20\nstock = 10\n";
  auto p = review(three);
  auto* f = find(p, "amount_outlier", "prizes[2].amount");  // 20000 cents vs median(1000, 2000) = 1500
  REQUIRE_MESSAGE(f, dump(p));
  CHECK(f->severity == Severity::warning);
  CHECK(f->line == 29);
  CHECK(f->message.find("13x") != std::string::npos);
  CHECK_FALSE(find(review(with(three, "amount = 20", "amount = 14")), "amount_outlier"));  // 9.3x
  // with only one sibling there is no median to trust
  auto two = with(kDirect, "budget_cents = 100000", "budget_cents = 100000000") +
             "\n[[prizes]]\ncode = \"c100\"\nitem = \"coupon_10\"\namount = 20\nstock = 10\n";
  CHECK_FALSE(find(review(two), "amount_outlier"));

  // a lottery's rare grand prize is expensive by design; a common prize costing 10x is not
  CHECK_FALSE(find(review(kLottery), "amount_outlier"));
  auto common = review(with(kLottery, "unit_cost_cents = 500", "unit_cost_cents = 50000"));
  auto* lf = find(common, "amount_outlier", "prizes[1].amount");
  REQUIRE_MESSAGE(lf, dump(common));
  CHECK(lf->message.find("weight 50") != std::string::npos);

  auto over = review(with(with(kDirect, "channel = \"ledger\"", "channel = \"ledger\"\nmax_amount = 1"), "amount = 1\nstock",
                          "amount = 10\nstock"));
  auto* m = find(over, "amount_over_item_max", "prizes[0].amount");
  REQUIRE_MESSAGE(m, dump(over));
  CHECK(m->severity == Severity::error);
  CHECK(m->line == 18);
  auto rp = review(with(kRedpack, "channel = \"ledger\"", "channel = \"ledger\"\nmax_amount = 50"));
  CHECK(find(rp, "amount_over_item_max", "prizes[0].amount_max"));

  auto cents = review(with(kDirect, "amount = 1", "amount = 1000"));  // 1000 coupons of 10 yuan: meant 1000 cents?
  REQUIRE(find(cents, "amount_vs_unit_cost", "prizes[0].amount"));
  CHECK(find(cents, "amount_vs_unit_cost")->severity == Severity::warning);
  auto unit = review(with(kRedpack, "unit_cost_cents = 1", "unit_cost_cents = 100"));
  CHECK(find(unit, "cash_unit_cost", "items.cash.unit_cost_cents"));
}

TEST_CASE("lint: limit_above_stock, buckets_over_stock, zero_stock, unused_item") {
  auto a = review(with(kDirect, "budget_cents = 100000", "budget_cents = 100000\n\n[limit]\ncount = 200\nperiod = \"day\""));
  auto* f = find(a, "limit_above_stock", "limit.count");
  REQUIRE_MESSAGE(f, dump(a));
  CHECK(f->severity == Severity::warning);
  CHECK(f->line == 10);
  auto pl = review(kDirect + "\n[prizes.limit]\ncount = 101\n");
  REQUIRE(find(pl, "limit_above_stock", "prizes[0].limit.count"));
  CHECK(find(pl, "limit_above_stock", "prizes[0].limit.count")->line == 21);
  // in a lottery the activity limit counts draws, not one prize: a 1-stock grand prize is normal
  CHECK_FALSE(find(review(with(kLottery, "budget_cents = 1000000", "budget_cents = 1000000\n[limit]\ncount = 20")),
                   "limit_above_stock"));

  auto b = review(with(kDirect, "stock = 100", "stock = 3\nstock_buckets = 8"));
  REQUIRE(find(b, "buckets_over_stock", "prizes[0].stock_buckets"));
  CHECK(find(b, "buckets_over_stock")->severity == Severity::error);  // empty buckets only slow claims down
  CHECK_FALSE(b.def);
  auto z = review(with(kDirect, "stock = 100", "stock = 0"));
  CHECK(find(z, "zero_stock", "prizes[0].stock")->severity == Severity::warning);
  auto u = review(kDirect + "\n[items.spare]\nkind = \"virtual\"\nunit_cost_cents = 0\nchannel = \"ledger\"\n");
  CHECK(find(u, "unused_item", "items.spare"));
}

TEST_CASE("lint: more stock buckets than the sane maximum is an error, even with stock for each") {
  auto over = review(with(kDirect, "stock = 100", "stock = 100000000\nstock_buckets = 100000000"));
  auto* f = find(over, "buckets_over_max", "prizes[0].stock_buckets");
  REQUIRE_MESSAGE(f, dump(over));
  CHECK(f->severity == Severity::error);
  CHECK(f->message.find("at most 1024") != std::string::npos);
  CHECK_FALSE(over.def);
  auto pg_int = review(with(kDirect, "stock = 100", "stock = 10\nstock_buckets = 3000000000"));
  CHECK(find(pg_int, "buckets_over_max", "prizes[0].stock_buckets"));
  CHECK_FALSE(find(pg_int, "buckets_over_stock"));  // one finding per field
  auto max = review(with(kDirect, "stock = 100", "stock = 5000\nstock_buckets = 1024"));
  CHECK_MESSAGE(!has_errors(max.findings), dump(max));
}

TEST_CASE("lint: value_too_large - sums, products, day counts and INTEGER columns the engine cannot hold") {
  SUBCASE("lottery weights that sum beyond 64 bits") {
    auto p = review(with(with(kLottery, "weight = 1\n", "weight = 9223372036854775807\n"), "weight = 50", "weight = 1"));
    auto* f = find(p, "value_too_large", "prizes");
    REQUIRE_MESSAGE(f, dump(p));
    CHECK(f->severity == Severity::error);
    CHECK(f->message.find("weights") != std::string::npos);
    CHECK_FALSE(p.def);
  }
  SUBCASE("a single weight at INT64_MAX alone is fine when the sum fits") {
    std::string one = with(with(with(with(kLottery, "weight = 50", "weight = 0"), "weight = 200", "weight = 0"),
                                "weight = 749", "weight = 0"),
                           "weight = 1\n", "weight = 9223372036854775807\n");
    auto p = review(one);
    CHECK_FALSE(find(p, "value_too_large"));
  }
  SUBCASE("validity_days beyond 100 years") {
    auto p = review(with(kDirect, "stock = 100", "stock = 100\nvalidity_days = 9223372036854775807"));
    auto* f = find(p, "value_too_large", "prizes[0].validity_days");
    REQUIRE_MESSAGE(f, dump(p));
    CHECK(f->message.find("36500") != std::string::npos);
    CHECK(f->line == 19);
    CHECK_FALSE(find(review(with(kDirect, "stock = 100", "stock = 100\nvalidity_days = 36500")), "value_too_large"));
  }
  SUBCASE("amount x unit cost beyond 64 bits") {
    auto p = review(with(kDirect, "amount = 1", "amount = 9223372036854775807"));
    CHECK(find(p, "value_too_large", "prizes[0].amount"));
    auto r = review(with(with(kRedpack, "amount_max = 100", "amount_max = 9223372036854775807"), "unit_cost_cents = 1",
                         "unit_cost_cents = 2"));
    CHECK(find(r, "value_too_large", "prizes[0].amount_max"));
    // a cost that alone does not fit: no budget is suggested (there is none, and 2^63-1 minus it is negative)
    for (auto* def : {&p, &r})
      for (auto& f : def->findings) CHECK(f.message.find("use a budget") == std::string::npos);
    CHECK_FALSE(find(r, "value_too_large", "budget_cents"));
    // a cost of exactly 2^63-1 fits, and leaves room for no budget at all: the prize is to lower
    auto m = review(with(with(with(kRedpack, "amount_max = 100", "amount_max = 9223372036854775807"),
                              "unit_cost_cents = 1\n", "unit_cost_cents = 1\n"),
                         "budget_cents = 100000", "budget_cents = 1"));
    auto* f = find(m, "value_too_large", "budget_cents");
    REQUIRE_MESSAGE(f, dump(m));
    CHECK(f->message.find("no budget can take a grant of this cost") != std::string::npos);
    CHECK(f->message.find("at most 0") == std::string::npos);
    // a cost above half of 2^63-1: every budget that fits is smaller than one grant
    auto h = review(with(with(kDirect, "unit_cost_cents = 1000", "unit_cost_cents = 9223372036854775806"),
                         "budget_cents = 100000", "budget_cents = 2"));
    auto* g = find(h, "value_too_large", "budget_cents");
    REQUIRE_MESSAGE(g, dump(h));
    CHECK(g->message.find("no budget can take a grant of this cost") != std::string::npos);
  }
  SUBCASE("stock x cost summed over the prizes beyond 64 bits") {
    auto p = review(with(with(kDirect, "unit_cost_cents = 1000", "unit_cost_cents = 1000000000000"), "stock = 100",
                         "stock = 10000000000"));
    auto* f = find(p, "value_too_large", "prizes");
    REQUIRE_MESSAGE(f, dump(p));
    CHECK(f->message.find("10000000000000000000000 cents") != std::string::npos);
  }
  SUBCASE("stock, cost and budget at INT64_MAX: the budget cannot take one more grant's cost") {
    auto p = review(with(with(with(kDirect, "unit_cost_cents = 1000", "unit_cost_cents = 1"), "stock = 100",
                              "stock = 9223372036854775807"),
                         "budget_cents = 100000", "budget_cents = 9223372036854775807"));
    auto* f = find(p, "value_too_large", "budget_cents");
    REQUIRE_MESSAGE(f, dump(p));
    CHECK(f->message.find("at most 9223372036854775806") != std::string::npos);  // the largest budget that works
    CHECK_FALSE(find(p, "value_too_large", "prizes"));  // INT64_MAX x 1 cent still fits
  }
  SUBCASE("fuse values for INTEGER columns") {
    auto p = review(kDirect + "\n[[fuse]]\nname = \"f\"\nwindow_seconds = 2147483648\nmax_count = 5\n"
                              "pop_percent = 2147483647\ndod_percent = 99999999999\n");
    CHECK(find(p, "value_too_large", "fuse[0].window_seconds"));
    CHECK_FALSE(find(p, "value_too_large", "fuse[0].pop_percent"));
    CHECK(find(p, "value_too_large", "fuse[0].dod_percent"));
  }
}

TEST_CASE("definition: gray list and blacklist users follow the identifier rules (bad_user_id)") {
  auto p = review(with(kDirect, "budget_cents = 100000",
                       "budget_cents = 100000\n[gray]\nusers = [\" qa \", \"   \", \"a\\u0001b\", \"" + std::string(65, 'u') +
                           "\"]\n[blacklist]\nusers = [\"\"]"));
  REQUIRE_MESSAGE(find(p, "bad_user_id", "gray.users[1]"), dump(p));
  CHECK(find(p, "bad_user_id", "gray.users[1]")->message.find("is empty") != std::string::npos);
  CHECK(find(p, "bad_user_id", "gray.users[2]")->message.find("control character") != std::string::npos);
  CHECK(find(p, "bad_user_id", "gray.users[3]")->message.find("65 bytes, at most 64") != std::string::npos);
  CHECK(find(p, "bad_user_id", "blacklist.users[0]"));
  CHECK_FALSE(find(p, "bad_user_id", "gray.users[0]"));
  CHECK_FALSE(p.def);
  auto ok = parse_definition(with(kDirect, "budget_cents = 100000", "budget_cents = 100000\n[gray]\nusers = [\" qa \"]"),
                             "t.toml");
  REQUIRE(ok.def);
  CHECK(ok.def->gray_users == std::vector<std::string>{"qa"});  // stored trimmed, as a claim's --user is
}

TEST_CASE("lint: redpack_range and redpack_shape") {
  auto inv = review(with(kRedpack, "amount_max = 100", "amount_max = 5"));
  auto* f = find(inv, "redpack_range", "prizes[0].amount_max");
  REQUIRE(f);
  CHECK(f->severity == Severity::error);
  CHECK(f->line == 18);
  // an empty packet: a range from 0 (a fixed amount may still be anything the item allows)
  auto empty = review(with(kRedpack, "amount_min = 10", "amount_min = 0"));
  REQUIRE(find(empty, "redpack_range", "prizes[0].amount_min"));
  CHECK(find(empty, "redpack_range", "prizes[0].amount_min")->severity == Severity::error);
  CHECK_FALSE(find(review(with(kRedpack, "amount_min = 10", "amount_min = 1")), "redpack_range"));
  // and a fixed packet of 0
  auto fixed0 = review(with(with(kRedpack, "amount_min = 10\n", "amount = 0\n"), "amount_max = 100\n", ""));
  REQUIRE_MESSAGE(find(fixed0, "redpack_range", "prizes[0].amount"), dump(fixed0));
  CHECK_FALSE(find(review(with(with(kRedpack, "amount_min = 10\n", "amount = 5\n"), "amount_max = 100\n", "")),
                   "redpack_range"));
  auto direct_range = review(with(kDirect, "amount = 1", "amount_min = 1\namount_max = 2"));
  CHECK(find(direct_range, "redpack_range", "prizes[0].amount_max"));

  auto two = review(kRedpack + "\n[[prizes]]\ncode = \"p2\"\nitem = \"cash\"\namount = 5\nstock = 1\n");
  REQUIRE(find(two, "redpack_shape", "prizes"));
  CHECK(find(two, "redpack_shape")->severity == Severity::error);
  auto coupon = review(with(kRedpack, "kind = \"cash\"", "kind = \"coupon\""));
  CHECK(find(coupon, "redpack_shape", "prizes[0].item"));
  CHECK(find(review(with(kRedpack.substr(0, kRedpack.find("[[prizes]]")), "budget_cents = 100000",
                         "budget_cents = 100000\nprizes = []")),
             "no_prizes", "prizes"));
}

TEST_CASE("lint: fuse rules, gray list against blacklist, long windows") {
  auto f = review(kDirect + "\n[[fuse]]\nname = \"rate\"\nprize = \"c1O\"\nwindow_seconds = 60\n");
  auto* up = find(f, "fuse_unknown_prize", "fuse[0].prize");
  REQUIRE_MESSAGE(up, dump(f));
  CHECK(up->severity == Severity::error);
  CHECK(up->line == 22);
  CHECK(up->message.find("did you mean 'c10'?") != std::string::npos);
  auto* nt = find(f, "fuse_no_threshold", "fuse[0]");
  REQUIRE(nt);
  CHECK(nt->line == 20);
  CHECK_FALSE(find(review(kDirect + "\n[[fuse]]\nname = \"rate\"\nwindow_seconds = 60\npop_percent = 200\n"),
                   "fuse_no_threshold"));
  CHECK(find(review(kDirect + "\n[[fuse]]\nname = \"rate\"\nmax_count = 5\n"), "missing_field", "fuse[0].window_seconds"));

  auto g = review(with(kDirect, "budget_cents = 100000",
                       "budget_cents = 100000\n[gray]\nusers = [\"qa\", \"u9\"]\n[blacklist]\nusers = [\"u9\"]"));
  auto* o = find(g, "gray_overlaps_blacklist", "gray.users[1]");
  REQUIRE_MESSAGE(o, dump(g));
  CHECK(o->severity == Severity::warning);
  CHECK(o->line == 9);

  auto longw = review(with(kDirect, "end = 2027-03-31T23:59:59+08:00", "end = 2028-03-31T23:59:59+08:00"));
  CHECK(find(longw, "window_too_long", "end")->severity == Severity::warning);
}

// ---------------------------------------------------------------- templates and examples

TEST_CASE("lint: every template lints clean and the templates together show every field") {
  const auto& ts = embedded::templates();
  std::vector<std::string> kinds;
  std::string all;
  for (auto& t : ts) {
    CAPTURE(t.kind);
    kinds.push_back(t.kind);
    CHECK(t.text == slurp(source_dir() + "/templates/" + t.kind + ".toml"));  // embedded as written
    auto p = review_definition(t.text, t.kind + ".toml", kDefault);
    INFO(dump(p));
    CHECK_FALSE(has_errors(p.findings));
    REQUIRE(p.def);
    CHECK(kind_name(p.def->kind) == t.kind);
    all += t.text;
  }
  CHECK(kinds == std::vector<std::string>{"direct", "lottery", "redpack"});
  // every key of the format, as `key =` at the start of a line, and every table header
  for (auto key : {"code", "name", "kind", "timezone", "start", "end", "whitelist_required", "budget_cents", "count",
                   "period", "users", "unit_cost_cents", "channel", "max_amount", "item", "amount", "amount_min",
                   "amount_max", "stock", "stock_buckets", "weight", "validity_days", "consolation", "nth", "prize",
                   "window_seconds", "max_count", "max_amount_cents", "pop_percent", "dod_percent", "min_count",
                   "warn_at", "degrade_at", "stop_at", "high_value"}) {
    CAPTURE(key);
    CHECK(all.find("\n" + std::string(key) + " = ") != std::string::npos);
  }
  for (auto header : {"[limit]", "[gray]", "[blacklist]", "[items.", "[[prizes]]", "[prizes.limit]", "[lottery]",
                      "[[lottery.guarantees]]", "[[fuse]]", "[budget]"}) {
    CAPTURE(header);
    CHECK(all.find("\n" + std::string(header)) != std::string::npos);
  }
  for (auto item_kind : {"cash", "coupon", "points", "virtual", "physical"})
    CHECK(all.find("kind = \"" + std::string(item_kind) + "\"") != std::string::npos);
  for (auto period : {"\"total\"", "\"day\""}) CHECK(all.find(std::string("period = ") + period) != std::string::npos);
}

TEST_CASE("lint: every example lints without errors or warnings") {
  auto files = toml_files(source_dir() + "/examples/activities");
  CHECK(files.size() >= 3);
  std::set<std::string> kinds;
  for (auto& f : files) {
    CAPTURE(f);
    auto p = review_definition(slurp(f), f, kDefault);
    INFO(dump(p));
    REQUIRE(p.def);
    kinds.insert(kind_name(p.def->kind));
    for (auto& x : p.findings) CHECK(x.severity == Severity::info);
  }
  CHECK(kinds == std::set<std::string>{"direct", "lottery", "redpack"});
}

TEST_CASE("lint: every bad example produces the findings its '# expect:' line names") {
  auto files = toml_files(source_dir() + "/examples/activities/bad");
  CHECK(files.size() >= 6);
  std::set<std::string> seen_codes;
  for (auto& f : files) {
    CAPTURE(f);
    std::string text = slurp(f);
    auto at = text.find("# expect: ");
    REQUIRE_MESSAGE(at != std::string::npos, "a bad example must say what it expects");
    std::string line = text.substr(at + 10, text.find('\n', at) - at - 10);
    auto p = review_definition(text, f, kDefault);
    INFO(dump(p));
    CHECK(has_errors(p.findings));
    CHECK_FALSE(p.def);
    std::stringstream ss(line);
    for (std::string item; std::getline(ss, item, ',');) {
      item.erase(0, item.find_first_not_of(' '));
      auto sp = item.find(' ');
      std::string code = item.substr(0, sp), path = sp == std::string::npos ? "" : item.substr(sp + 1);
      CAPTURE(item);
      CHECK(find(p, code, path));
      seen_codes.insert(code);
    }
  }
  CHECK(seen_codes.count("unknown_key"));
  CHECK(seen_codes.count("syntax"));
}

TEST_CASE("lint: every finding code the sources emit is in the man page's table, with its severity") {
  std::string man = slurp(source_dir() + "/man/rewardctl.1.scd");
  std::map<std::string, std::string> codes;  // code -> severity named next to it in the source
  for (auto src : {"/src/core/activity/definition.cpp", "/src/core/activity/lint.cpp"}) {
    std::string text = slurp(source_dir() + src);
    for (size_t at = 0; (at = text.find("add(\"", at)) != std::string::npos; ++at) {
      size_t b = at + 5, e = text.find('"', b);
      std::string code = text.substr(b, e - b);
      std::string rest = text.substr(e, 40);
      std::string sev = rest.find("Severity::warning") != std::string::npos ? "warning"
                        : rest.find("Severity::info") != std::string::npos  ? "info"
                                                                              : "error";
      codes[code] = sev;
    }
  }
  codes["syntax"] = "error";  // built without add()
  CHECK(codes.size() >= 35);
  for (auto& [code, sev] : codes) {
    CAPTURE(code);
    CHECK(man.find("|  " + code + "\n:  " + sev + "\n") != std::string::npos);
  }
}
