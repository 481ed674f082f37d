// activity new / activity lint through the real binary. They need no database: the suite runs under
// both backend labels, and every run here points --db at a place where no database can exist.
#include <doctest/doctest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "support/harness.hpp"

using nlohmann::json;

namespace {

// A database URL that cannot be opened: lint and new must never touch the store.
std::vector<std::string> no_db(std::vector<std::string> args) {
  args.insert(args.end(), {"--db", "sqlite:/nonexistent/dir/never.db"});
  return args;
}

const char* kBad = R"(code = "gift"
name = "Gift"
kind = "direct"
timezone = "Asia/Shanghai"
start = 2027-03-01T00:00:00+08:00
end = 2027-03-31T23:59:59+08:00

[items.coupon_10]
kind = "coupon"
unit_cost_cents = 1000
channel = "ledger"

[[prizes]]
code = "c10"
item = "coupon_01"
amount = 1
stock = 100
)";

}  // namespace

TEST_CASE("activity new/lint: each kind's template lints clean, from stdin and from a file") {
  std::string dir = rt::make_temp_dir();
  for (std::string kind : {"direct", "lottery", "redpack"}) {
    CAPTURE(kind);
    auto t = rt::run(no_db({"activity", "new", "--kind", kind}), {}, "", dir);
    REQUIRE(t.rc == 0);
    CHECK(t.out.find("kind = \"" + kind + "\"") != std::string::npos);
    CHECK(t.out == rt::read_file(std::string(REWARDCTL_SOURCE_DIR) + "/templates/" + kind + ".toml"));

    auto piped = rt::run(no_db({"activity", "lint", "-"}), {}, t.out, dir);
    INFO(piped.all());
    CHECK(piped.rc == 0);
    CHECK(piped.out.find("<stdin>: 0 errors") != std::string::npos);

    std::string file = rt::write_file(dir, kind + ".toml", t.out);
    auto lf = rt::run(no_db({"activity", "lint", file}), {}, "", dir);
    INFO(lf.all());
    CHECK(lf.rc == 0);
    CHECK(lf.out.find(file + ": 0 errors") != std::string::npos);
  }
  (void)!system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("activity new/lint: an unknown or missing kind is a usage error (64)") {
  auto r = rt::run(no_db({"activity", "new", "--kind", "raffle"}));
  CHECK(r.rc == 64);
  CHECK(r.out.empty());
  CHECK(r.err.find("direct, lottery, redpack") != std::string::npos);
  CHECK(rt::run(no_db({"activity", "new"})).rc == 64);
}

TEST_CASE("activity lint: a bad file exits 1 with each finding on stdout as file:line:col") {
  std::string dir = rt::make_temp_dir();
  std::string file = rt::write_file(dir, "bad.toml", kBad);
  auto r = rt::run(no_db({"activity", "lint", file}), {}, "", dir);
  INFO(r.all());
  CHECK(r.rc == 1);
  auto ls = rt::lines(r.out);
  REQUIRE(ls.size() >= 2);
  bool found = false;
  for (auto& l : ls)
    if (l.rfind(file + ":15:8:", 0) == 0) {  // item = "coupon_01" is on line 15, its value at column 8
      found = true;
      CHECK(l.find("error") != std::string::npos);
      CHECK(l.find("unknown_item") != std::string::npos);
      CHECK(l.find("prizes[0].item") != std::string::npos);
      CHECK(l.find("did you mean 'coupon_10'?") != std::string::npos);
    }
  CHECK(found);
  CHECK(ls.back() == file + ": 1 error, 1 warning, 0 infos: fix the errors before `activity create`");
  (void)!system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("activity lint -o json: one object per finding, then a summary") {
  auto r = rt::run(no_db({"activity", "lint", "-", "-o", "json"}), {}, kBad);
  INFO(r.all());
  CHECK(r.rc == 1);
  auto ls = rt::lines(r.out);
  REQUIRE(ls.size() == 3);
  std::map<std::string, int> by_severity;
  const std::set<std::string> keys = {"v", "type", "severity", "code", "path", "line", "column", "message"};
  for (size_t i = 0; i + 1 < ls.size(); ++i) {
    auto j = json::parse(ls[i]);
    std::set<std::string> got;
    for (auto it = j.begin(); it != j.end(); ++it) got.insert(it.key());
    CHECK(got == keys);
    CHECK(j["v"] == 1);
    CHECK(j["type"] == "finding");
    CHECK(j["line"].is_number_integer());
    CHECK(j["column"].is_number_integer());
    by_severity[j["severity"].get<std::string>()]++;
  }
  auto first = json::parse(ls[0]);
  CHECK(first["severity"] == "error");
  CHECK(first["code"] == "unknown_item");
  CHECK(first["path"] == "prizes[0].item");
  CHECK(first["line"] == 15);
  CHECK(first["column"] == 8);
  auto s = json::parse(ls.back());
  CHECK(s == json{{"v", 1}, {"type", "summary"}, {"errors", by_severity["error"]},
                  {"warnings", by_severity["warning"]}, {"infos", by_severity["info"]}});
  CHECK(s["errors"] == 1);

  auto clean = rt::run(no_db({"activity", "lint", std::string(REWARDCTL_SOURCE_DIR) + "/examples/activities/lucky_draw.toml",
                              "-o", "json"}));
  CHECK(clean.rc == 0);
  auto cl = rt::lines(clean.out);
  REQUIRE(cl.size() == 2);
  auto info = json::parse(cl[0]);
  CHECK(info["code"] == "expected_cost");
  CHECK(info["severity"] == "info");
  CHECK(info["message"].get<std::string>().find("per draw") != std::string::npos);
  CHECK(json::parse(cl[1])["errors"] == 0);
}

TEST_CASE("activity lint: warnings alone exit 0, a missing or unreadable file exits 66") {
  std::string dir = rt::make_temp_dir();
  std::string warn = std::string(kBad);
  warn.replace(warn.find("coupon_01"), 9, "coupon_10");
  warn.replace(warn.find("stock = 100"), 11, "stock = 0");  // zero_stock: a warning
  std::string file = rt::write_file(dir, "warn.toml", warn);
  auto w = rt::run(no_db({"activity", "lint", file}));
  INFO(w.all());
  CHECK(w.rc == 0);
  CHECK(w.out.find("zero_stock") != std::string::npos);

  auto m = rt::run(no_db({"activity", "lint", dir + "/missing.toml"}));
  CHECK(m.rc == 66);
  CHECK(m.out.empty());
  CHECK(m.err.find(dir + "/missing.toml") != std::string::npos);
  CHECK(rt::run(no_db({"activity", "lint", dir})).rc == 66);  // a directory
  CHECK(rt::run(no_db({"activity", "lint"})).rc == 64);       // no file given
  (void)!system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("activity lint: channels come from the config's [channels.NAME] tables") {
  std::string dir = rt::make_temp_dir();
  std::string def = std::string(kBad);
  def.replace(def.find("coupon_01"), 9, "coupon_10");
  def.replace(def.find("channel = \"ledger\""), 18, "channel = \"partner_hook\"");
  std::string file = rt::write_file(dir, "hook.toml", def);
  auto without = rt::run(no_db({"activity", "lint", file}), {}, "", dir);
  CHECK(without.rc == 1);
  CHECK(without.out.find("unknown_channel") != std::string::npos);
  std::string cfg = rt::write_file(dir, "rewardctl.toml",
                                   "[channels.partner_hook]\ntype = \"webhook\"\nurl = \"https://partner.example/deliver\"\n"
                                   "secret = \"env:PARTNER_HOOK_SECRET\"\n");
  auto with = rt::run(no_db({"--config", cfg, "activity", "lint", file}), {}, "", dir);
  INFO(with.all());
  CHECK(with.rc == 0);
  CHECK(with.out.find("unknown_channel") == std::string::npos);
  (void)!system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("activity lint: the examples lint clean and the bad examples exit 1") {
  std::string ex = std::string(REWARDCTL_SOURCE_DIR) + "/examples/activities/";
  for (auto f : {"whitelist_gift.toml", "lucky_draw.toml", "random_redpack.toml"}) {
    auto r = rt::run(no_db({"activity", "lint", ex + f}));
    INFO(f << "\n" << r.all());
    CHECK(r.rc == 0);
  }
  for (auto f : {"misspelt_keys.toml", "floats_and_negatives.toml", "codes_zone_time.toml", "window_order.toml",
                 "lottery_pool.toml", "extra_zero.toml", "redpack_shape.toml", "syntax.toml"}) {
    auto r = rt::run(no_db({"activity", "lint", ex + "bad/" + f}));
    INFO(f << "\n" << r.all());
    CHECK(r.rc == 1);
    CHECK(r.out.find(" error ") != std::string::npos);
  }
}

TEST_CASE("activity lint: disguised gray and blacklist users (invisible, not NFC) are bad_user_id errors at file:line (exit 1)") {
  std::string dir = rt::make_temp_dir();
  std::string t = rt::read_file(std::string(REWARDCTL_SOURCE_DIR) + "/templates/direct.toml");
  // the line number of what replaced `from`
  auto replace = [&](const std::string& from, const std::string& to) {
    auto p = t.find(from);
    REQUIRE(p != std::string::npos);
    t.replace(p, from.size(), to);
    return std::to_string(1 + std::count(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(p), '\n'));
  };
  // the gray list: a raw U+200B after qa_bob; the blacklist: NFD café (a TOML escape), a raw tag character
  const std::string gray_line =
      replace("users = [\"qa_alice\", \"qa_bob\"]", "users = [\"qa_alice\", \"qa_bob\xE2\x80\x8B\"]");
  const std::string black_line =
      replace("users = [\"fraud_user_1\"]", "users = [\"cafe\\u0301\", \"x\xF3\xA0\x81\x81\", \"caf\\u00e9\"]");
  std::string file = rt::write_file(dir, "disguised.toml", t);
  auto r = rt::run(no_db({"activity", "lint", file}), {}, "", dir);
  INFO(r.all());
  CHECK(r.rc == 1);
  int found = 0;
  for (auto& l : rt::lines(r.out)) {
    if (l.find("bad_user_id") == std::string::npos) continue;
    ++found;
    if (l.rfind(file + ":" + gray_line + ":", 0) == 0)
      CHECK(l.find("'gray.users[1]' holds an invisible character U+200B at character 7 (byte 6)") != std::string::npos);
    else if (l.find("blacklist.users[0]") != std::string::npos)
      CHECK((l.rfind(file + ":" + black_line + ":", 0) == 0 &&
             l.find("is not in Unicode NFC (character 4, byte 3, U+0301 combines with what precedes it") != std::string::npos));
    else
      CHECK((l.rfind(file + ":" + black_line + ":", 0) == 0 &&
             l.find("'blacklist.users[1]' holds an invisible character U+E0041 at character 2 (byte 1)") != std::string::npos));
  }
  CHECK(found == 3);  // and none for the NFC café
  CHECK(rt::lines(r.out).back() == file + ": 3 errors, 0 warnings, 0 infos: fix the errors before `activity create`");
  (void)!system(("rm -rf '" + dir + "'").c_str());
}
