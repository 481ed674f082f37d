// util/csv_reader: records, physical line numbers, malformed records and structural errors.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "util/csv_reader.hpp"

using rc::csv::Reader;
using rc::csv::Record;

namespace {

// A temporary file holding `text`, removed when it goes out of scope.
struct TempFile {
  std::string path;
  int fd = -1;
  explicit TempFile(const std::string& text) {
    char tmpl[] = "/tmp/rccsv.XXXXXX";
    fd = mkstemp(tmpl);
    path = tmpl;
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, text.data(), text.size()) == ssize_t(text.size()));
    lseek(fd, 0, SEEK_SET);
  }
  ~TempFile() {
    close(fd);
    unlink(path.c_str());
  }
};

std::vector<Record> parse(const std::string& text, rc::csv::Limits limits = {}) {
  TempFile f(text);
  Reader r(f.fd, "t.csv", limits);
  std::vector<Record> out;
  Record rec;
  while (r.next(rec)) out.push_back(rec);
  return out;
}

std::vector<std::string> F(std::initializer_list<const char*> l) { return {l.begin(), l.end()}; }

}  // namespace

TEST_CASE("csv: fields and the physical line each record starts on") {
  SUBCASE("plain LF") {
    auto r = parse("user_id,tier\nu1,gold\nu2,silver\n");
    REQUIRE(r.size() == 3);
    CHECK(r[0].fields == F({"user_id", "tier"}));
    CHECK(r[2].fields == F({"u2", "silver"}));
    CHECK(r[2].line == 3);
    CHECK(r[2].error.empty());
  }
  SUBCASE("byte-order mark and CRLF") {
    auto r = parse("\xEF\xBB\xBFuser_id,tier\r\nu1,gold\r\nu2,silver\r\n");
    REQUIRE(r.size() == 3);
    CHECK(r[0].fields[0] == "user_id");
    CHECK(r[1].fields == F({"u1", "gold"}));
    CHECK(r[2].line == 3);
  }
  SUBCASE("quoted newline, comma and doubled quote; the next record's line is physical") {
    auto r = parse("user_id,note\nu1,\"two\nlines, \"\"quoted\"\"\"\nu2,x\n");
    REQUIRE(r.size() == 3);
    CHECK(r[1].fields[1] == "two\nlines, \"quoted\"");
    CHECK(r[1].line == 2);
    CHECK(r[1].end_line == 3);
    CHECK(r[2].line == 4);
  }
  SUBCASE("blank lines are skipped but counted") {
    auto r = parse("user_id\n\nu1\n\r\n   \nu2");
    REQUIRE(r.size() == 3);
    CHECK(r[1].line == 3);
    CHECK(r[2].line == 6);  // no newline at the end
    CHECK(r[2].fields == F({"u2"}));
  }
  SUBCASE("spaces around unquoted fields are dropped, quoted ones kept") {
    auto r = parse("user_id,tier\n  u1  , \" gold \" \n");
    CHECK(r[1].fields == F({"u1", " gold "}));
  }
  SUBCASE("empty fields and NUL bytes are data") {
    auto r = parse(std::string("a,b,c\n,x\0y,\n", 12));
    REQUIRE(r.size() == 2);
    CHECK(r[1].fields.size() == 3);
    CHECK(r[1].fields[1] == std::string("x\0y", 3));
    CHECK(r[1].fields[2].empty());
  }
  SUBCASE("a 100 KB field") {
    std::string big(100 * 1024, 'z');
    auto r = parse("user_id,blob\nu1," + big + "\nu2,\"" + big + "\"\n");
    REQUIRE(r.size() == 3);
    CHECK(r[1].fields[1] == big);
    CHECK(r[2].fields[1] == big);
    CHECK(r[2].line == 3);
  }
  SUBCASE("an empty input and a lone byte-order mark have no records") {
    CHECK(parse("").empty());
    CHECK(parse("\xEF\xBB\xBF").empty());
  }
  SUBCASE("fields beyond the limit are counted, not kept") {
    rc::csv::Limits l;
    l.max_fields = 3;
    auto r = parse("a,b,c,d,e\n", l);
    CHECK(r[0].fields.size() == 3);
    CHECK(r[0].field_count == 5);
  }
}

TEST_CASE("csv: a malformed record is returned with an error and reading resumes on the next line") {
  SUBCASE("quote inside an unquoted field") {
    auto r = parse("user_id,tier\nu1,go\"ld\nu2,silver\n");
    REQUIRE(r.size() == 3);
    CHECK(r[1].error.find("field 2") != std::string::npos);
    CHECK(r[1].line == 2);
    CHECK(r[1].raw == "u1,go\"ld");
    CHECK(r[2].error.empty());
    CHECK(r[2].fields == F({"u2", "silver"}));
    CHECK(r[2].line == 3);
  }
  SUBCASE("text after a closing quote, in a record that started on an earlier line") {
    auto r = parse("user_id,note\nu1,\"a\nb\"c,d\nu2,ok\n");
    REQUIRE(r.size() == 3);
    CHECK(r[1].line == 2);
    CHECK(r[1].end_line == 3);
    CHECK(r[1].error.find("after the closing quote") != std::string::npos);
    CHECK(r[1].raw == "u1,\"a\nb\"c,d");
    CHECK(r[2].line == 4);
  }
  SUBCASE("a malformed last line without a newline") {
    auto r = parse("user_id\nu\"1");
    REQUIRE(r.size() == 2);
    CHECK_FALSE(r[1].error.empty());
  }
}

TEST_CASE("csv: structural errors name the input and line") {
  SUBCASE("unterminated quote at the end") {
    try {
      parse("user_id,note\nu1,ok\nu2,\"never closed\nmore\n");
      FAIL("no error");
    } catch (const rc::csv::StructuralError& e) {
      CHECK(e.line() == 3);
      CHECK(std::string(e.what()).find("t.csv:3: unterminated quoted field") == 0);
    }
  }
  SUBCASE("a field over the limit") {
    rc::csv::Limits l;
    l.max_field_bytes = 1000;
    CHECK_THROWS_AS(parse("user_id\n\"" + std::string(5000, 'x') + "\"\n", l), rc::csv::StructuralError);
  }
  SUBCASE("a record over the limit") {
    rc::csv::Limits l;
    l.max_record_bytes = 1000;
    std::string line;
    for (int i = 0; i < 200; ++i) line += "abcdefgh,";
    CHECK_THROWS_AS(parse("h\n" + line + "\n", l), rc::csv::StructuralError);
  }
}

TEST_CASE("csv: a pipe delivering one byte at a time (byte-order mark split across reads)") {
  int p[2];
  REQUIRE(pipe(p) == 0);
  std::string text = "\xEF\xBB\xBFuser_id\r\n\"u\n1\"\r\nu2\r\n";
  std::thread w([&] {
    for (char c : text) {
      (void)!write(p[1], &c, 1);
      usleep(200);
    }
    close(p[1]);
  });
  Reader r(p[0], "-");
  CHECK_FALSE(r.rewindable());
  std::vector<Record> out;
  Record rec;
  while (r.next(rec)) out.push_back(rec);
  w.join();
  close(p[0]);
  REQUIRE(out.size() == 3);
  CHECK(out[0].fields[0] == "user_id");
  CHECK(out[1].fields[0] == "u\n1");
  CHECK(out[2].line == 4);
  CHECK(r.where(4) == "<stdin>:4");
}

TEST_CASE("csv: rewind starts over and the tap sees every byte once per pass") {
  TempFile f("user_id\nu1\nu2\n");
  Reader r(f.fd, "t.csv");
  size_t tapped = 0;
  r.set_tap([&](const char*, size_t n) { tapped += n; });
  Record rec;
  int n = 0;
  while (r.next(rec)) ++n;
  CHECK(n == 3);
  CHECK(r.bytes_read() == 14);
  REQUIRE(r.rewindable());
  r.rewind();
  tapped = 0;
  REQUIRE(r.next(rec));
  CHECK(rec.fields[0] == "user_id");
  while (r.next(rec)) ++n;
  CHECK(tapped == 14);
  CHECK(rec.line == 3);
}

TEST_CASE("csv: writing fields quotes only what needs it, and reads back the same") {
  std::vector<std::string> in{"plain", "a,b", "say \"hi\"", "two\nlines", " padded ", "", "中文"};
  std::string line = rc::csv::join_fields(in);
  CHECK(line == "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\" padded \",,中文");
  auto r = parse(line + "\n");
  REQUIRE(r.size() == 1);
  CHECK(r[0].fields == in);
}

TEST_CASE("csv: UTF-8 validation") {
  CHECK(rc::csv::valid_utf8("abc"));
  CHECK(rc::csv::valid_utf8("用户一"));
  CHECK(rc::csv::valid_utf8("\xF0\x9F\x98\x80"));   // emoji
  CHECK_FALSE(rc::csv::valid_utf8("\xFF"));
  CHECK_FALSE(rc::csv::valid_utf8("\xC0\xAF"));      // overlong '/'
  CHECK_FALSE(rc::csv::valid_utf8("\xED\xA0\x80"));  // surrogate
  CHECK_FALSE(rc::csv::valid_utf8("\xE4\xB8"));      // truncated
  CHECK_FALSE(rc::csv::valid_utf8("\xF4\x90\x80\x80"));  // over U+10FFFF
}
