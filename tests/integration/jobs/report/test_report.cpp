// report: the figures of an activity as JSON and as one self-contained HTML page. The page is
// rendered in a real headless browser (Debian's chromium, installed by scripts/dev test like
// PostgreSQL): it loads with no console message and no network request, every prize code is on it,
// and the figures its tables show equal what the database holds. A control page with a console
// error and an external image proves that the browser harness would see both.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

// A listener on loopback that stands for "the network": the browser's proxy and its resolver both
// point at it, so any request the page makes arrives here. Records the first line and Host of each.
class NetTrap {
 public:
  NetTrap() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 16);
    th_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        char buf[1024];
        pollfd q{c, POLLIN, 0};
        ssize_t n = ::poll(&q, 1, 5000) > 0 ? ::read(c, buf, sizeof buf) : 0;
        ::close(c);
        // a connection that never sends a request (a browser's speculative preconnect) fetches nothing
        if (n <= 0) continue;
        std::lock_guard<std::mutex> g(mu_);
        seen_.push_back(std::string(buf, size_t(n)));
      }
    });
  }
  ~NetTrap() {
    stop_ = true;
    th_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  // Requests other than the browser's own background services (updates, time, accounts), which a
  // headless Chromium contacts whatever page it shows.
  std::vector<std::string> page_requests() {
    std::lock_guard<std::mutex> g(mu_);
    static const std::regex own(R"((google\.com|googleapis\.com|gvt1\.com|gstatic\.com)(:\d+)?[ /\r])");
    std::vector<std::string> out;
    for (auto& s : seen_) {
      std::string first = s.substr(0, s.find('\n'));
      if (!std::regex_search(first, own)) out.push_back(first);
    }
    return out;
  }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread th_;
  std::mutex mu_;
  std::vector<std::string> seen_;
};

struct Rendered {
  std::string dom;
  std::vector<std::string> console;   // console messages the page logged
  std::vector<std::string> requests;  // network requests the page made
};

// Loads file:// path in headless chromium and returns the DOM after load.
Rendered render(const std::string& path) {
  NetTrap trap;
  const std::string profile = make_temp_dir();
  const std::string p = "127.0.0.1:" + std::to_string(trap.port());
  auto r = run_program({"timeout", "180", "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0", "--proxy-server=" + p,
                        "--host-resolver-rules=MAP * " + p, "--dump-dom", "file://" + path});
  INFO(r.err.substr(0, 4000));
  REQUIRE_MESSAGE(r.rc == 0, "chromium must be installed (scripts/dev test installs it) and load the page");
  Rendered out;
  out.dom = r.out;
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);)
    if (line.find(":CONSOLE") != std::string::npos) out.console.push_back(line);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a request still being read
  out.requests = trap.page_requests();
  return out;
}

// The number in the element carrying data-k="key" inside the element with id="table_id".
int64_t figure(const std::string& dom, const std::string& table_id, const std::string& key) {
  auto t = dom.find("id=\"" + table_id + "\"");
  REQUIRE_MESSAGE(t != std::string::npos, "no table " << table_id);
  auto end = dom.find("</table>", t);
  std::string tab = dom.substr(t, end - t);
  std::smatch m;
  std::regex re("data-k=\"" + key + "\"[^>]*>(?:<th[^>]*>[^<]*</th><td>)?(-?[0-9]+)<");
  REQUIRE_MESSAGE(std::regex_search(tab, m, re), "no figure " << key << " in " << table_id);
  return std::stoll(m[1]);
}

// The number of the prize's row cell data-k=key in the stock table.
int64_t prize_figure(const std::string& dom, const std::string& prize, const std::string& key) {
  auto t = dom.find("data-prize=\"" + prize + "\"");
  REQUIRE_MESSAGE(t != std::string::npos, "no stock row for " << prize);
  std::string row = dom.substr(t, dom.find("</tr>", t) - t);
  std::smatch m;
  REQUIRE(std::regex_search(row, m, std::regex("data-k=\"" + key + "\">(-?[0-9]+)<")));
  return std::stoll(m[1]);
}

json claim(const TestDb& db, const std::string& user, const std::string& biz, int expect) {
  return json::parse(lines(db.ok({"claim", "act", "--user", user, "--biz-id", biz, "-o", "json"}, expect).out).at(0));
}

// Two prizes, a budget, a limit of one per user; three granted, two rejected for two reasons, one
// held by a manual fuse block; reconcile ran.
void busy_activity(const TestDb& db) {
  Spec s;
  s.limit = 1;
  s.budget = 100000;
  s.custom_prizes = true;
  s.extra =
      "[[prizes]]\ncode = \"p1\"\nitem = \"thing\"\namount = 1\nstock = 2\nstock_buckets = 2\n"
      "[[prizes]]\ncode = \"gold-2\"\nitem = \"thing\"\namount = 1\nstock = 5\n";
  seed(db, s);
  claim(db, "u1", "b1", 0);
  claim(db, "u2", "b2", 0);
  claim(db, "u1", "b3", 1);   // limit_reached
  claim(db, "u1", "b3", 1);   // the same request again: counted again (it is another rejected call)
  db.ok({"fuse", "block", "act", "--reason", "spike", "-o", "json"});
  claim(db, "u5", "b5", 1);   // held
  db.ok({"claim", "act", "--user", "u6", "--biz-id", "b6", "--dry-run"}, 1);  // a dry run: not counted
  db.ok({"reconcile"});
}

// The requests-over-time figures of a page: bucket start (data-at, epoch ms) -> outcome ("granted",
// "held", "rejected:REASON") -> count, the non-zero cells of every row of the timeline's table.
using Series = std::map<int64_t, std::map<std::string, int64_t>>;
Series page_series(const std::string& dom) {
  auto t = dom.find("id=\"timeline-figures\"");
  REQUIRE_MESSAGE(t != std::string::npos, "no timeline-figures table");
  const std::string tab = dom.substr(t, dom.find("</table>", t) - t);
  Series out;
  static const std::regex row(R"re(<tr data-at="(-?[0-9]+)">(.*?)</tr>)re"),
      cell(R"re(data-k="([^"]+)">(-?[0-9]+)<)re");
  for (std::sregex_iterator r(tab.begin(), tab.end(), row), end; r != end; ++r) {
    const std::string cells = (*r)[2];
    auto& b = out[std::stoll((*r)[1])];
    for (std::sregex_iterator c(cells.begin(), cells.end(), cell); c != end; ++c)
      if (std::stoll((*c)[2]) != 0) b[(*c)[1]] = std::stoll((*c)[2]);
  }
  return out;
}

// The same from the database's own GROUP BY: `start` is the SQL of a bucket's start for a time
// column X (bound parameters $1, $2 as the caller gives them).
Series db_series(const TestDb& db, const std::function<std::string(const std::string&)>& start,
                 const rc::store::Params& p) {
  auto st = db.open();
  Series out;
  for (auto& x : st->query("SELECT " + start("created_at") + ", CASE WHEN fuse_event_id IS NULL THEN 'granted' ELSE "
                           "'held' END, count(*) FROM grants GROUP BY 1, 2", p)
                     .rows)
    out[x.i64(0)][x.str(1)] += x.i64(2);
  for (auto& x : st->query("SELECT " + start("minute_at") + ", reason, sum(n) FROM claim_reject GROUP BY 1, 2", p).rows)
    out[x.i64(0)]["rejected:" + x.str(1)] += x.i64(2);
  return out;
}

std::string dump(const Series& s) {
  std::string o;
  for (auto& [at, cells] : s) {
    o += std::to_string(at) + ":";
    for (auto& [k, n] : cells) o += " " + k + "=" + std::to_string(n);
    o += "\n";
  }
  return o;
}

// Requests spread over a day and a half (UTC times; the zone is Asia/Shanghai, UTC+8): granted,
// rejected for two reasons, held by a fuse, in several hours and on two local days (23:59:59 and
// 00:00:30 local are one UTC day).
void spread_activity(const TestDb& db) {
  Spec s;
  s.limit = 2;
  s.custom_prizes = true;
  s.extra =
      "[[prizes]]\ncode = \"p1\"\nitem = \"thing\"\namount = 1\nstock = 10\n"
      "[[prizes]]\ncode = \"p2\"\nitem = \"thing\"\namount = 1\nstock = 1\n";
  seed(db, s);
  auto at = [](const std::string& t) { return std::map<std::string, std::string>{{"REWARDCTL_NOW", t}}; };
  auto claim_at = [&](const std::string& t, const std::string& user, const std::string& biz, int expect,
                      const std::string& prize = "p1") {
    db.ok({"claim", "act", "--user", user, "--biz-id", biz, "--prize", prize}, expect, at(t));
  };
  claim_at("2026-03-01T09:05:00Z", "u1", "b1", 0);
  claim_at("2026-03-01T09:50:00Z", "u1", "b2", 0);
  claim_at("2026-03-01T09:55:00Z", "u1", "b3", 1);  // limit_reached
  claim_at("2026-03-01T11:10:00Z", "u2", "b4", 0, "p2");
  claim_at("2026-03-01T11:20:00Z", "u3", "b5", 1, "p2");  // sold_out
  claim_at("2026-03-01T11:21:00Z", "u1", "b6", 1);        // limit_reached
  claim_at("2026-03-01T15:59:59Z", "u3", "b7", 0);        // 23:59:59 local
  claim_at("2026-03-01T16:00:30Z", "u4", "b8", 0);        // 00:00:30 local, the next day
  db.ok({"fuse", "block", "act", "--reason", "spike"}, 0, at("2026-03-02T01:30:00Z"));
  claim_at("2026-03-02T01:40:00Z", "u5", "b9", 1);  // held
}

}  // namespace

TEST_CASE("report: -o json gives the activity's figures, equal to the database's") {
  TestDb db;
  db.migrate();
  busy_activity(db);
  auto j = last_json(db.ok({"report", "act", "-o", "json"}));
  CHECK(j["type"] == "report");
  CHECK(j["activity"] == "act");
  CHECK(j["state"] == "live");
  CHECK(j["granted"] == db.count("SELECT count(*) FROM grants WHERE fuse_event_id IS NULL"));
  CHECK(j["granted"] == 2);
  CHECK(j["held"] == 1);
  CHECK(j["rejected"] == 2);
  CHECK(j["reject_reasons"]["limit_reached"] == 2);
  CHECK(j["cost_cents"] == db.count("SELECT consumed_cents FROM budget"));
  CHECK(j["budget"]["authorised_cents"] == 100000);
  int64_t series_granted = 0, series_rejected = 0;
  for (auto& b : j["series"]) {
    series_granted += b["granted"].get<int64_t>();
    for (auto& [k, v] : b["rejected"].items()) series_rejected += v.get<int64_t>();
  }
  CHECK(series_granted == 2);
  CHECK(series_rejected == 2);
  REQUIRE(j["stock"].size() == 2);
  for (auto& p : j["stock"])
    CHECK(p["remain"] == db.count("SELECT sum(s.remain) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.code = $1",
                                  {p["prize"].get<std::string>()}));
  CHECK(j["grant_states"]["pending"] == 1);
  CHECK(j["fuse"].size() == 1);
  CHECK(j["fuse"][0]["kind"] == "manual");
  CHECK(j["reconcile"]["state"] == "clean");
  CHECK(db.count("SELECT sum(n) FROM claim_reject") == 2);  // the dry run and the held request are not counted
}

TEST_CASE("report: the HTML page renders in headless chromium with no console message or network request") {
  TestDb db;
  db.migrate();
  busy_activity(db);
  const std::string page = db.dir() + "/act.html";
  auto j = last_json(db.ok({"report", "act", "--html", page, "-o", "json"}));
  CHECK(j["html"] == page);
  const std::string html = read_file(page);
  // self-contained: no script, no URL to fetch
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http:") == std::string::npos);
  CHECK(html.find("https:") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);

  Rendered r = render(page);
  CHECK(r.console.empty());
  CHECK(r.requests.empty());
  for (auto& c : r.console) MESSAGE("console: " << c);
  for (auto& q : r.requests) MESSAGE("request: " << q);
  REQUIRE(r.dom.find("<h1>act") != std::string::npos);
  CHECK(r.dom.find("p1") != std::string::npos);
  CHECK(r.dom.find("gold-2") != std::string::npos);
  CHECK(figure(r.dom, "totals", "granted") == db.count("SELECT count(*) FROM grants WHERE fuse_event_id IS NULL"));
  CHECK(figure(r.dom, "totals", "held") == db.count("SELECT count(*) FROM grants WHERE state = 'pending'"));
  CHECK(figure(r.dom, "totals", "rejected") == db.count("SELECT sum(n) FROM claim_reject"));
  CHECK(figure(r.dom, "budget-figures", "consumed_cents") == db.count("SELECT consumed_cents FROM budget"));
  CHECK(figure(r.dom, "budget-figures", "authorised_cents") == db.count("SELECT authorised_cents FROM budget"));
  for (std::string p : {"p1", "gold-2"}) {
    CHECK(prize_figure(r.dom, p, "remain") ==
          db.count("SELECT sum(s.remain) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.code = $1", {p}));
    CHECK(prize_figure(r.dom, p, "total") ==
          db.count("SELECT sum(s.total) FROM stock s JOIN prize p ON p.id = s.prize_id WHERE p.code = $1", {p}));
  }
  CHECK(figure(r.dom, "rejects-figures", "limit_reached") == 2);
  CHECK(figure(r.dom, "delivery-figures", "success") == db.count("SELECT count(*) FROM grants WHERE state = 'success'"));
  CHECK(figure(r.dom, "reconcile-figures", "diffs_all") == 0);
  CHECK(r.dom.find("data-event=") != std::string::npos);  // the fuse event is listed
}

TEST_CASE("report: the browser harness sees a console error and a network request (control page)") {
  const std::string dir = make_temp_dir();
  const std::string bad = write_file(dir, "bad.html",
                                     "<!DOCTYPE html><html><body><p>x</p><img src=\"http://example.invalid/x.png\">"
                                     "<script>console.error('control-console');</script></body></html>");
  Rendered r = render(bad);
  REQUIRE(r.console.size() == 1);
  CHECK(r.console[0].find("control-console") != std::string::npos);
  REQUIRE(r.requests.size() >= 1);
  CHECK(r.requests[0].find("example.invalid") != std::string::npos);
}

TEST_CASE("report --html DIR: an index page linking one page per activity, each with its sparkline") {
  TestDb db;
  db.migrate();
  busy_activity(db);
  Spec quiet;
  quiet.code = "quiet";
  seed(db, quiet);
  const std::string dir = db.dir() + "/site/deeper";
  auto j = last_json(db.ok({"report", "--html", dir, "-o", "json"}));
  CHECK(j["type"] == "index");
  CHECK(j["activities"] == 2);
  const std::string index = read_file(dir + "/index.html");
  CHECK(index.find("href=\"act.html\"") != std::string::npos);
  CHECK(index.find("href=\"quiet.html\"") != std::string::npos);
  CHECK(index.find("<polyline") != std::string::npos);
  CHECK(read_file(dir + "/act.html").find("href=\"index.html\"") != std::string::npos);
  CHECK(read_file(dir + "/quiet.html").find("No claim was rejected") != std::string::npos);
  Rendered r = render(dir + "/index.html");
  CHECK(r.console.empty());
  CHECK(r.requests.empty());
  CHECK(figure(r.dom, "index", "granted") == 2);  // act's row comes first
}

TEST_CASE("report: text from the database is escaped in the page") {
  TestDb db;
  db.migrate();
  Spec s;
  std::string def = definition(s);
  def.replace(def.find("name = \"test act\""), std::string("name = \"test act\"").size(),
              "name = \"<script>alert(1)</script> & \\\"q\\\" 'x'\"");
  const std::string f = write_file(db.dir(), "act.toml", def);
  db.ok({"activity", "create", "-f", f, "--publish", "--operator", "seeder"}, 0, {{"REWARDCTL_REVIEW_REQUIRED", "false"}});
  const std::string page = db.dir() + "/p.html";
  db.ok({"report", "act", "--html", page});
  const std::string html = read_file(page);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot; &#39;x&#39;") != std::string::npos);
}

TEST_CASE("report: bad input is refused with its exit code and nothing is written") {
  TestDb db;
  db.migrate();
  Spec s;
  seed(db, s);
  const std::string out = db.dir() + "/r.html";
  CHECK(db.ok({"report", "nope", "--html", out}, 67).err.find("nope") != std::string::npos);
  CHECK(db.ok({"report", "act", "--bucket", "5m"}, 64).err.find("--bucket") != std::string::npos);
  CHECK(db.ok({"report", "act", "--from", "yesterday"}, 64).err.find("--from") != std::string::npos);
  CHECK(db.ok({"report", "act", "--from", "2026-02-01T00:00:00Z", "--to", "2026-01-01T00:00:00Z"}, 64)
            .err.find("before --to") != std::string::npos);
  CHECK(db.ok({"report", "act", "--from", "2000-01-01T00:00:00Z", "--to", "2030-01-01T00:00:00Z", "--bucket", "1m"},
              64)
            .err.find("buckets") != std::string::npos);
  CHECK(db.ok({"report"}, 64).err.find("--html DIR") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out));
  // a page that cannot be written: exit 73, nothing left behind
  auto r = db.ok({"report", "act", "--html", db.dir() + "/no/such/dir/r.html"}, 73);
  CHECK(r.err.find("cannot write") != std::string::npos);
  // a path that is not a regular file (a FIFO, /dev/stdout's kind) is refused, never replaced
  const std::string fifo = db.dir() + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(db.ok({"report", "act", "--html", fifo}, 73).err.find("not a regular file") != std::string::npos);
  struct stat sb;
  REQUIRE(::lstat(fifo.c_str(), &sb) == 0);
  CHECK(S_ISFIFO(sb.st_mode));
  CHECK(db.ok({"report", "act", "--from", ""}, 64).err.find("--from is empty") != std::string::npos);
  const std::string file_not_dir = write_file(db.dir(), "plain", "x");
  CHECK(db.ok({"report", "--html", file_not_dir}, 73).err.find("cannot create the directory") != std::string::npos);
}

TEST_CASE("report: --bucket and --from/--to choose the timeline's buckets") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 1;
  seed(db, s);
  std::map<std::string, std::string> t1{{"REWARDCTL_NOW", "2026-03-01T10:00:30Z"}}, t2{{"REWARDCTL_NOW", "2026-03-01T12:30:00Z"}};
  db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1"}, 0, t1);
  db.ok({"claim", "act", "--user", "u2", "--biz-id", "b2"}, 1, t2);  // sold_out, two and a half hours later
  auto j = last_json(db.ok({"report", "act", "-o", "json"}));
  CHECK(j["bucket"] == "1m");  // 151 minutes fit in 240 one-minute buckets
  CHECK(j["from"] == "2026-03-01T10:00:00.000Z");
  CHECK(j["series"].size() == 151);
  CHECK(j["series"][0]["granted"] == 1);
  CHECK(j["series"][150]["rejected"]["sold_out"] == 1);
  auto h = last_json(db.ok({"report", "act", "--bucket", "1h", "-o", "json"}));
  CHECK(h["from"] == "2026-03-01T10:00:00.000Z");
  REQUIRE(h["series"].size() == 3);
  CHECK(h["series"][2]["rejected"]["sold_out"] == 1);
  auto w = last_json(db.ok({"report", "act", "--from", "2026-03-01T12:00:00Z", "--to", "2026-03-01T13:00:00Z",
                            "--bucket", "1h", "-o", "json"}));
  CHECK(w["granted"] == 0);
  CHECK(w["rejected"] == 1);
}

TEST_CASE("report: day buckets are calendar days in the activity's zone - a grant at 23:30 local is on that day") {
  TestDb db;
  db.migrate();
  Spec s;  // Asia/Shanghai (UTC+8)
  s.stock = 10;
  seed(db, s);
  const std::string zone = "Asia/Shanghai";
  auto at = [](const std::string& t) { return std::map<std::string, std::string>{{"REWARDCTL_NOW", t}}; };
  // 15:30 and 16:30 UTC: one UTC day, two days in Shanghai
  db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1"}, 0, at("2026-03-01T23:30:00+08:00"));
  db.ok({"claim", "act", "--user", "u2", "--biz-id", "b2"}, 0, at("2026-03-02T00:30:00+08:00"));
  auto j = last_json(db.ok({"report", "act", "--bucket", "1d", "-o", "json"}));
  CHECK(j["bucket"] == "1d");
  CHECK(j["bucket_zone"] == zone);
  CHECK(j["from"] == "2026-02-28T16:00:00.000Z");  // midnight of 1 March in Shanghai
  REQUIRE(j["series"].size() == 2);
  CHECK(j["series"][0]["local"] == "2026-03-01T00:00:00+08:00");
  CHECK(j["series"][0]["end"] == "2026-03-01T16:00:00.000Z");
  CHECK(j["series"][0]["granted"] == 1);
  CHECK(j["series"][1]["local"] == "2026-03-02T00:00:00+08:00");
  CHECK(j["series"][1]["granted"] == 1);
  // the same split as the database's own, with the zone's offset: (created_at + 8 h) / 1 day
  CHECK(db.count("SELECT count(DISTINCT (created_at + 28800000) / 86400000) FROM grants") == 2);
  // automatic buckets: a month of data is too long for hours, so days in the zone
  db.ok({"claim", "act", "--user", "u3", "--biz-id", "b3"}, 0, at("2026-03-31T23:59:00+08:00"));
  auto a = last_json(db.ok({"report", "act", "-o", "json"}));
  CHECK(a["bucket"] == "1d");
  CHECK(a["from"] == "2026-02-28T16:00:00.000Z");
  REQUIRE(a["series"].size() == 31);
  CHECK(a["series"][30]["local"] == "2026-03-31T00:00:00+08:00");
  CHECK(a["series"][30]["granted"] == 1);
  // the page says which zone its buckets use, and labels them in it
  const std::string page = db.dir() + "/days.html";
  db.ok({"report", "act", "--bucket", "1d", "--html", page});
  const std::string html = read_file(page);
  CHECK(html.find("calendar days in Asia/Shanghai") != std::string::npos);
  CHECK(html.find("bucket start (Asia/Shanghai)") != std::string::npos);
  CHECK(html.find("2026-03-01 00:00 +08:00") != std::string::npos);
}

TEST_CASE("report: in the browser, every bucket of requests over time equals the database's GROUP BY, per outcome") {
  TestDb db;
  db.migrate();
  spread_activity(db);
  // hours: fixed buckets from the report's start
  const std::string hours = db.dir() + "/hours.html";
  auto jh = last_json(db.ok({"report", "act", "--bucket", "1h", "--html", hours, "-o", "json"}));
  const int64_t from = *rc::parse_rfc3339(jh["from"].get<std::string>());
  CHECK(jh["from"] == "2026-03-01T09:00:00.000Z");
  Rendered rh = render(hours);
  CHECK(rh.console.empty());
  CHECK(rh.requests.empty());
  const Series want_h = db_series(
      db, [](const std::string& x) { return "(" + x + " - CAST($1 AS BIGINT)) / 3600000 * 3600000 + CAST($1 AS BIGINT)"; },
      {from});
  const Series got_h = page_series(rh.dom);
  INFO("page:\n" << dump(got_h) << "database:\n" << dump(want_h));
  CHECK(got_h.size() == 5);  // 09, 11, 15 and 16 UTC on the 1st; 01 on the 2nd (the held request)
  CHECK(got_h == want_h);
  // days: calendar days in Asia/Shanghai, the database's own offset arithmetic (UTC+8, no DST)
  const std::string days = db.dir() + "/days.html";
  db.ok({"report", "act", "--bucket", "1d", "--html", days});
  Rendered rd = render(days);
  CHECK(rd.console.empty());
  CHECK(rd.requests.empty());
  const Series want_d = db_series(
      db, [](const std::string& x) { return "(" + x + " + CAST($1 AS BIGINT)) / 86400000 * 86400000 - CAST($1 AS BIGINT)"; },
      {int64_t(8 * 3'600'000)});
  const Series got_d = page_series(rd.dom);
  INFO("page:\n" << dump(got_d) << "database:\n" << dump(want_d));
  REQUIRE(got_d.size() == 2);
  CHECK(got_d == want_d);
  CHECK(got_d.begin()->first == *rc::parse_rfc3339("2026-03-01T00:00:00+08:00"));
  CHECK(got_d.begin()->second.at("granted") == 4);  // 17:05, 17:50, 19:10 and 23:59:59 local on 1 March
}
