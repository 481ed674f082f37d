// jobs/import_rows: the row rules of a whitelist file, the reject budget, the rejects file and the
// duplicate filter.
#include <doctest/doctest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.hpp"
#include "jobs/import/rows.hpp"
#include "jobs/input/reject_limit.hpp"
#include "jobs/input/rejects_writer.hpp"
#include "util/bloom.hpp"

using namespace rc::jobs::import;
using rc::util::Bloom;

namespace {

rc::csv::Record rec(std::vector<std::string> fields, int64_t line = 2) {
  rc::csv::Record r;
  r.field_count = fields.size();
  r.fields = std::move(fields);
  r.line = r.end_line = line;
  return r;
}

Header header(std::vector<std::string> names) {
  Header h;
  h.names = names;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "user_id") h.user_col = i;
    else if (names[i] != "_line" && names[i] != "_error") h.ext_cols.push_back(i);
  }
  return h;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("import rows: user ids are trimmed, then must be present, short and printable") {
  CHECK(trim_user_id(" \tu1 \r\n") == "u1");
  CHECK(trim_user_id("\xE3\x80\x80u1\xC2\xA0\xEF\xBB\xBF") == "u1");  // U+3000, U+00A0, U+FEFF
  CHECK(trim_user_id("u 1") == "u 1");
  CHECK(trim_user_id("   ").empty());
  CHECK(check_user_id("") == "user_id is empty");
  CHECK(check_user_id(std::string(64, 'a')).empty());
  CHECK(check_user_id(std::string(65, 'a')) == "user_id is 65 bytes, at most 64");
  CHECK(check_user_id("用户一").empty());
  CHECK(check_user_id("a\tb") == "user_id holds a control character");
  CHECK(check_user_id("a\x7f") == "user_id holds a control character");
  CHECK(check_user_id("a\xC2\x85") == "user_id holds a control character");  // U+0085
  CHECK(check_user_id("a\xff") == "user_id is not valid UTF-8");
}

TEST_CASE("import rows: a valid row gives its user and the other columns as JSON") {
  Header h = header({"tier", "user_id", "note", "_line", "_error"});
  std::string uid, ext;
  CHECK(check_row(h, rec({"gold", " u1 ", "say \"hi\"\\\n\x01", "7", "old"}), uid, ext).empty());
  CHECK(uid == "u1");
  auto j = nlohmann::json::parse(ext);
  CHECK(j == nlohmann::json{{"tier", "gold"}, {"note", "say \"hi\"\\\n\x01"}});
  Header only = header({"user_id"});
  CHECK(check_row(only, rec({"u2"}), uid, ext).empty());
  CHECK(ext.empty());
}

TEST_CASE("import rows: the reasons a row is rejected, and the text written for it") {
  Header h = header({"user_id", "tier"});
  std::string uid, ext;
  CHECK(check_row(h, rec({"u1"}), uid, ext) == "1 field, the header has 2 (missing columns)");
  CHECK(check_row(h, rec({"u1", "a", "b"}), uid, ext) == "3 fields, the header has 2 (extra columns)");
  CHECK(check_row(h, rec({"u1", std::string("a\0b", 3)}), uid, ext) == "field 'tier' holds a NUL byte");
  CHECK(check_row(h, rec({"u1", "\xc3\x28"}), uid, ext) == "field 'tier' is not valid UTF-8");
  CHECK(check_row(h, rec({"", "x"}), uid, ext) == "user_id is empty");
  auto bad = rec({"u1"});
  bad.error = "malformed quoting in field 2: a quote inside an unquoted field";
  bad.raw = "u1,go\"ld";
  CHECK(check_row(h, bad, uid, ext) == bad.error);
  CHECK(reject_text(h, bad) == "\"u1,go\"\"ld\",");
  CHECK(reject_text(h, rec({"u1"})) == "u1,");
  CHECK(reject_text(h, rec({"u1", "a,b", "extra"})) == "u1,\"a,b\"");
  CHECK(reject_text(header({"user_id", "_line", "_error"}), rec({"u1", "3", "x"})) == "u1");
}

TEST_CASE("import rows: --max-rejects as a count or a percentage of the rows read") {
  auto n = RejectLimit::parse("10");
  CHECK_FALSE(n.over(10, 20));
  CHECK(n.over(11, 1000000));
  CHECK(n.text() == "10");
  auto p = RejectLimit::parse("0.5%");
  CHECK_FALSE(p.over(5, 1000));
  CHECK(p.over(6, 1000));
  CHECK(p.text() == "0.5%");
  CHECK_FALSE(RejectLimit::parse("100%").over(7, 7));
  CHECK_FALSE(RejectLimit{}.over(0, 0));
  CHECK(RejectLimit{}.over(1, 100));
  for (const char* bad : {"", "-1", "1.5", "abc", "101%", "%", "x%", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(RejectLimit::parse(bad), rc::Error);
  }
}

TEST_CASE("import rows: the rejects file is created on the first reject, cut back, resumed and cleaned up") {
  char dir[] = "/tmp/rcrej.XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string path = std::string(dir) + "/in.csv.rejects.csv";
  {
    RejectsWriter w(path, "user_id,tier", true);
    CHECK(w.flush() == 0);
    CHECK(access(path.c_str(), F_OK) != 0);  // nothing rejected: no file
    w.add(3, "u1,", "1 field, the header has 2 (missing columns)");
    const uint64_t mark = w.flush();
    CHECK(slurp(path) == "user_id,tier,_line,_error\nu1,,3,\"1 field, the header has 2 (missing columns)\"\n");
    w.add(9, "u9,x", "later");
    w.truncate_to(mark);  // a retried batch takes back what it wrote
    w.add(10, "u10,x", "again");
    const uint64_t committed = w.flush();
    w.add(11, "u11,x", "not committed");
    w.flush();
    RejectsWriter resumed(path, "user_id,tier", true);
    CHECK(resumed.resume(committed));
    resumed.add(12, "u12,x", "after the resume");
    resumed.flush();
    CHECK(slurp(path) ==
          "user_id,tier,_line,_error\nu1,,3,\"1 field, the header has 2 (missing columns)\"\nu10,x,10,again\n"
          "u12,x,12,after the resume\n");
  }
  RejectsWriter clean(path, "user_id,tier", true);
  clean.remove_stale();  // a run that rejected nothing removes the earlier run's file
  CHECK(access(path.c_str(), F_OK) != 0);
  std::ofstream(path) << "not,ours\n";
  clean.remove_stale();  // but never a file that is not a rejects file
  CHECK(access(path.c_str(), F_OK) == 0);
  RejectsWriter off(path, "user_id", false);  // a dry run without --rejects writes nothing
  off.add(2, "x", "y");
  CHECK(off.written() == 1);
  CHECK(slurp(path) == "not,ours\n");
  (void)!system(("rm -rf " + std::string(dir)).c_str());
}

TEST_CASE("import rows: the duplicate filter never misses a repeat and rarely cries wolf") {
  Bloom b(200000);
  CHECK(b.bytes() == 1 << 20);  // at least 1 MiB; 10 bits an item
  int seen_again = 0, false_alarms = 0;
  for (int i = 0; i < 100000; ++i) false_alarms += b.test_and_add("u" + std::to_string(i));
  for (int i = 0; i < 100000; ++i) seen_again += b.test_and_add("u" + std::to_string(i));
  for (int i = 100000; i < 200000; ++i) false_alarms += b.test_and_add("u" + std::to_string(i));
  CHECK(seen_again == 100000);
  CHECK(false_alarms < 2000);  // < 1%
  CHECK(Bloom(1'000'000'000).bytes() == 32u << 20);  // capped
}
