// Pure parts of report and drill: the chi-square tail the lottery check decides with, the HTML
// escaping and page shape of report, the bucket flag.
#include <doctest/doctest.h>

#include "jobs/drill/internal.hpp"
#include "jobs/report/html.hpp"
#include "core/zone_day.hpp"

using namespace rc::jobs;

TEST_CASE("drill: chi_square_p matches the tables") {
  // critical values from the chi-square table: p = 0.05 and p = 0.001
  CHECK(drill::chi_square_p(3.841, 1) == doctest::Approx(0.05).epsilon(0.01));
  CHECK(drill::chi_square_p(18.307, 10) == doctest::Approx(0.05).epsilon(0.01));
  CHECK(drill::chi_square_p(13.816, 2) == doctest::Approx(0.001).epsilon(0.01));
  CHECK(drill::chi_square_p(29.588, 10) == doctest::Approx(0.001).epsilon(0.01));
  CHECK(drill::chi_square_p(0.0, 4) == 1.0);
  CHECK(drill::chi_square_p(1e6, 3) < 1e-12);
  // the median of chi-square with k dof is about k(1 - 2/(9k))^3
  CHECK(drill::chi_square_p(99.334, 100) == doctest::Approx(0.5).epsilon(0.01));
}

TEST_CASE("report: html_escape escapes the five characters and nothing else") {
  CHECK(report::html_escape("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  CHECK(report::html_escape("红包 ok") == "红包 ok");
}

TEST_CASE("report: a page has no script, no URL, a CSP, and every prize and figure of its data") {
  report::Data d;
  d.h.code = "act";
  d.h.name = "<b>x</b>";
  d.h.start_at = 0;
  d.h.end_at = 86'399'000;
  d.from = 0;
  d.to = 120'000;
  d.bucket = 60'000;
  d.series.resize(2);
  d.series[0].at = 0;
  d.series[0].end = 60'000;
  d.series[0].granted = 5;
  d.series[1].at = 60'000;
  d.series[1].end = 120'000;
  d.series[1].rejected["sold_out"] = 7;
  d.granted = 5;
  d.rejected = 7;
  d.reject_reasons = {{"sold_out", 7}};
  report::PrizeStock p;
  p.code = "gold-2";
  p.total = 10;
  p.remain = 5;
  d.stock.push_back(p);
  const std::string html = report::render_activity(d, 0);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http:") == std::string::npos);
  CHECK(html.find("https:") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("Content-Security-Policy") != std::string::npos);
  CHECK(html.find("&lt;b&gt;x&lt;/b&gt;") != std::string::npos);
  CHECK(html.find("data-prize=\"gold-2\"") != std::string::npos);
  CHECK(html.find("<td data-k=\"remain\">5</td>") != std::string::npos);
  CHECK(html.find("<td data-k=\"rejected:sold_out\">7</td>") != std::string::npos);
  CHECK(html.find("This activity has no budget") != std::string::npos);
  const std::string index = report::render_index({d}, 0);
  CHECK(index.find("href=\"act.html\"") != std::string::npos);
  CHECK(index.find("<polyline") != std::string::npos);
}

TEST_CASE("report: --bucket takes 1m, 1h, 1d") {
  CHECK(report::parse_bucket("1m") == 60'000);
  CHECK(report::parse_bucket("1h") == 3'600'000);
  CHECK(report::parse_bucket("1d") == 86'400'000);
  CHECK_THROWS_AS(report::parse_bucket("5m"), rc::Error);
  CHECK(report::bucket_name(3'600'000) == "1h");
}

namespace {
rc::Millis at(const char* rfc3339) { return *rc::parse_rfc3339(rfc3339); }
}  // namespace

TEST_CASE("report: 1d buckets are calendar days in the activity's zone, 1h and 1m fixed lengths") {
  SUBCASE("Asia/Shanghai: every day starts at 16:00 UTC") {
    const auto e = report::bucket_edges(at("2026-03-01T00:00:00+08:00"), at("2026-03-03T12:00:00+08:00"), 86'400'000,
                                        "Asia/Shanghai");
    REQUIRE(e.size() == 4);
    CHECK(e[0] == at("2026-02-28T16:00:00Z"));
    CHECK(e[1] == at("2026-03-01T16:00:00Z"));
    CHECK(e[2] == at("2026-03-02T16:00:00Z"));
    CHECK(e[3] == at("2026-03-03T16:00:00Z"));  // the first edge at or after to
    // 23:30 local on 1 March is in the bucket of 1 March, not of the UTC day it falls in
    CHECK(rc::day_start_in_zone(at("2026-03-01T23:30:00+08:00"), "Asia/Shanghai") == e[0]);
    CHECK(rc::day_start_in_zone(at("2026-03-02T00:30:00+08:00"), "Asia/Shanghai") == e[1]);
  }
  SUBCASE("Europe/Berlin: the day clocks go forward has 23 hours, the day they go back 25") {
    const auto spring = report::bucket_edges(at("2026-03-28T00:00:00+01:00"), at("2026-03-31T00:00:00+02:00"),
                                             86'400'000, "Europe/Berlin");
    REQUIRE(spring.size() == 4);
    CHECK(spring[0] == at("2026-03-27T23:00:00Z"));
    CHECK(spring[1] == at("2026-03-28T23:00:00Z"));  // 29 March, 00:00 CET
    CHECK(spring[2] == at("2026-03-29T22:00:00Z"));  // 30 March, 00:00 CEST
    CHECK(spring[2] - spring[1] == 23 * 3'600'000);
    CHECK(spring[1] - spring[0] == 24 * 3'600'000);
    const auto autumn = report::bucket_edges(at("2026-10-25T00:00:00+02:00"), at("2026-10-26T12:00:00+01:00"),
                                             86'400'000, "Europe/Berlin");
    REQUIRE(autumn.size() == 3);
    CHECK(autumn[0] == at("2026-10-24T22:00:00Z"));
    CHECK(autumn[1] == at("2026-10-25T23:00:00Z"));
    CHECK(autumn[1] - autumn[0] == 25 * 3'600'000);
    CHECK(rc::next_day_start_in_zone(at("2026-10-25T12:00:00+01:00"), "Europe/Berlin") == autumn[1]);
  }
  SUBCASE("an explicit start that is not midnight: the first bucket runs to the next midnight") {
    const auto e = report::bucket_edges(at("2026-03-01T10:00:00+08:00"), at("2026-03-02T10:00:00+08:00"), 86'400'000,
                                        "Asia/Shanghai");
    REQUIRE(e.size() == 3);
    CHECK(e[1] == at("2026-03-02T00:00:00+08:00"));
  }
  SUBCASE("hours keep their length across the change") {
    const auto e = report::bucket_edges(at("2026-03-29T00:00:00+01:00"), at("2026-03-29T05:00:00+02:00"), 3'600'000,
                                        "Europe/Berlin");
    REQUIRE(e.size() == 5);
    for (size_t i = 1; i < e.size(); ++i) CHECK(e[i] - e[i - 1] == 3'600'000);
  }
  SUBCASE("too many buckets is a usage error naming --bucket") {
    CHECK_THROWS_WITH_AS(report::bucket_edges(0, rc::Millis(30'000) * 86'400'000, 86'400'000, "Asia/Shanghai"),
                         doctest::Contains("--bucket 1d"), rc::Error);
  }
}
