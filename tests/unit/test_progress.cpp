// jobs/progress: modes, the text of an update, and when each mode writes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/error.hpp"
#include "jobs/runtime/progress.hpp"

using rc::jobs::Progress;
using rc::jobs::ProgressMode;

namespace {

// Everything written to a temporary FILE*.
std::string contents(std::FILE* f) {
  fflush(f);
  std::string s;
  rewind(f);
  int c;
  while ((c = fgetc(f)) != EOF) s += char(c);
  return s;
}

}  // namespace

TEST_CASE("progress: --progress values, and --quiet wins") {
  CHECK(rc::jobs::progress_mode("none", false) == ProgressMode::none);
  CHECK(rc::jobs::progress_mode("plain", false) == ProgressMode::plain);
  CHECK(rc::jobs::progress_mode("tty", false) == ProgressMode::tty);
  CHECK(rc::jobs::progress_mode("tty", true) == ProgressMode::none);
  CHECK(rc::jobs::progress_mode("auto", true) == ProgressMode::none);
  try {
    rc::jobs::progress_mode("loud", false);
    FAIL("no error");
  } catch (const rc::Error& e) {
    CHECK(e.kind() == rc::Errc::usage);
  }
  CHECK(rc::jobs::group_thousands(0) == "0");
  CHECK(rc::jobs::group_thousands(1234567) == "1,234,567");
  CHECK(rc::jobs::group_thousands(-1000) == "-1,000");
}

TEST_CASE("progress: one update's text: rows, percentage of the work, rate and ETA") {
  double t = 0;
  std::FILE* f = tmpfile();
  Progress p(ProgressMode::plain, "import act", 2000, "rows", f, [&] { return t; });
  CHECK(p.line(500, 1000, 10) == "import act: 500 rows (50%), 50 rows/s, ETA 0:10");
  CHECK(p.line(500, 0, 0) == "import act: 500 rows (0%), 0 rows/s");
  Progress unknown(ProgressMode::plain, "import act", 0, "rows", f, [&] { return t; });
  CHECK(unknown.line(1200, 99, 4) == "import act: 1,200 rows, 300 rows/s");
  fclose(f);
}

TEST_CASE("progress: plain writes a line every interval, tty redraws in place, none writes nothing") {
  double t = 0;
  auto feed = [&](Progress& p, int from, int to) {
    for (int i = from; i < to; ++i) p.update(i, uint64_t(i));
  };
  SUBCASE("plain") {
    std::FILE* f = tmpfile();
    {
      Progress p(ProgressMode::plain, "job", 10000, "rows", f, [&] { return t; }, 5.0);
      feed(p, 0, 1000);
      t = 4.9;
      feed(p, 1000, 2000);
      CHECK(contents(f).empty());
      t = 5.1;
      feed(p, 2000, 3000);
      t = 6;
      feed(p, 3000, 4000);  // within 5 s of the last line: nothing
      t = 10.2;
      feed(p, 4000, 5000);
    }
    std::string out = contents(f);
    CHECK(std::count(out.begin(), out.end(), '\n') == 2);
    CHECK(out.find("job: ") == 0);
    CHECK(out.find('\r') == std::string::npos);
    fclose(f);
  }
  SUBCASE("tty") {
    std::FILE* f = tmpfile();
    {
      Progress p(ProgressMode::tty, "job", 10000, "rows", f, [&] { return t; });
      t = 0.5;
      feed(p, 0, 600);
      p.phase("inserting");
      p.finish();
    }
    std::string out = contents(f);
    CHECK(out.find("\r[") == 0);
    CHECK(out.find("inserting") != std::string::npos);
    CHECK(out.find('\n') == std::string::npos);
    CHECK(out.substr(out.size() - 4) == "\r\x1b[K");  // cleared for the summary that follows
    fclose(f);
  }
  SUBCASE("none") {
    std::FILE* f = tmpfile();
    {
      Progress p(ProgressMode::none, "job", 10000, "rows", f, [&] { return t; });
      t = 100;
      feed(p, 0, 5000);
      p.phase("inserting");
    }
    CHECK(contents(f).empty());
    fclose(f);
  }
}
