#include "jobs/report/html.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/activity/window.hpp"

namespace rc::jobs::report {
namespace {

const char* const kStyle =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em auto;max-width:1000px;padding:0 1em;color:#222}"
    "h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.15em;margin:1.6em 0 .4em;border-bottom:1px solid #ccc}"
    "dl.head{display:grid;grid-template-columns:max-content auto;gap:.1em 1em}dl.head dt{color:#666}"
    "dl.head dd{margin:0}table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ddd;"
    "padding:.15em .5em;text-align:right}th{background:#f4f4f4}td.l,th.l{text-align:left}"
    "svg{display:block;max-width:100%;height:auto;background:#fcfcfc;border:1px solid #eee}"
    "svg text{font:11px sans-serif;fill:#444}.granted{fill:#3a8f3a}.held{fill:#d89b00}.rejected{fill:#c0392b}"
    ".fuse{stroke:#7b1fa2;stroke-width:2}.burn{fill:none;stroke:#1565c0;stroke-width:2}"
    ".auth{stroke:#c0392b;stroke-dasharray:6 3}.pace{stroke:#888;stroke-dasharray:2 3}.bar{fill:#1565c0}"
    ".rest{fill:#e3e3e3}.key span{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;"
    "vertical-align:middle}.ok{color:#2e7d32}.bad{color:#c0392b;font-weight:bold}footer{margin-top:2em;color:#777}";

// No script, no fetch of anything: the page must render offline with nothing to load.
const char* const kCsp = "default-src 'none'; style-src 'unsafe-inline'";

constexpr double kW = 900, kH = 220, kLeft = 60, kRight = 10, kTop = 10, kBottom = 30;

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string esc(const std::string& s) { return html_escape(s); }

// "2026-12-01 13:05" (UTC): the label of a bucket or an event.
std::string short_time(Millis t) {
  std::string s = format_utc(t);  // 2026-12-01T13:05:00.000Z
  return s.size() >= 16 ? s.substr(0, 10) + " " + s.substr(11, 5) : s;
}

// A bucket edge in the zone its buckets use: UTC ("2026-12-01 13:05"), or for calendar days the
// activity's zone ("2026-12-01 00:00 +08:00").
std::string bucket_time(const Data& d, Millis t) {
  if (d.bucket_zone == "UTC") return short_time(t);
  const std::string s = format_in_zone(t, d.bucket_zone);  // 2026-12-01T00:00:00+08:00
  return s.size() >= 25 ? s.substr(0, 10) + " " + s.substr(11, 5) + " " + s.substr(19) : s;
}

std::string money(int64_t cents) {
  const bool neg = cents < 0;
  uint64_t c = neg ? uint64_t(0) - uint64_t(cents) : uint64_t(cents);
  char b[48];
  std::snprintf(b, sizeof b, "%s%llu.%02llu", neg ? "-" : "", (unsigned long long)(c / 100),
                (unsigned long long)(c % 100));
  return b;
}

// A table row "<tr data-k=KEY><th>LABEL</th><td>VALUE</td></tr>".
std::string kv_row(const std::string& key, const std::string& label, const std::string& value) {
  return "<tr data-k=\"" + esc(key) + "\"><th class=\"l\">" + esc(label) + "</th><td>" + esc(value) + "</td></tr>";
}

std::string figures(const std::string& body) {
  return "<details><summary>Figures</summary>" + body + "</details>";
}

// Horizontal bars, one per (label, value), each against `max` (the rest of the row in grey).
std::string hbars(const std::string& title, const std::vector<std::pair<std::string, int64_t>>& rows,
                  const std::vector<int64_t>& maxes) {
  const double row_h = 22, label_w = 200, plot_w = kW - label_w - 80;
  const double h = std::max(1.0, double(rows.size())) * row_h + 10;
  std::ostringstream o;
  o << "<svg viewBox=\"0 0 " << num(kW) << ' ' << num(h) << "\" role=\"img\" aria-label=\"" << esc(title) << "\">";
  o << "<title>" << esc(title) << "</title>";
  for (size_t i = 0; i < rows.size(); ++i) {
    const double y = 5 + double(i) * row_h;
    const int64_t mx = std::max<int64_t>(1, maxes.at(i));
    const double w = plot_w * double(std::clamp<int64_t>(rows[i].second, 0, mx)) / double(mx);
    o << "<text x=\"" << num(label_w - 6) << "\" y=\"" << num(y + 14) << "\" text-anchor=\"end\">" << esc(rows[i].first)
      << "</text>";
    o << "<rect class=\"rest\" x=\"" << num(label_w) << "\" y=\"" << num(y + 3) << "\" width=\"" << num(plot_w)
      << "\" height=\"" << num(row_h - 6) << "\"/>";
    o << "<rect class=\"bar\" x=\"" << num(label_w) << "\" y=\"" << num(y + 3) << "\" width=\"" << num(w)
      << "\" height=\"" << num(row_h - 6) << "\"><title>" << esc(rows[i].first) << ": " << rows[i].second
      << "</title></rect>";
    o << "<text x=\"" << num(label_w + plot_w + 6) << "\" y=\"" << num(y + 14) << "\">" << rows[i].second << "</text>";
  }
  o << "</svg>";
  return o.str();
}

std::string header(const Data& d, const std::string& index_href) {
  const auto& h = d.h;
  std::ostringstream o;
  if (!index_href.empty()) o << "<p><a href=\"" << esc(index_href) << "\">All activities</a></p>";
  o << "<h1>" << esc(h.code) << " &mdash; " << esc(h.name) << "</h1><dl class=\"head\" id=\"header\">";
  auto item = [&](const std::string& k, const std::string& label, const std::string& v) {
    o << "<dt>" << esc(label) << "</dt><dd data-k=\"" << esc(k) << "\">" << esc(v) << "</dd>";
  };
  item("kind", "Kind", h.kind);
  item("state", "State", h.state);
  item("window", "Window (UTC)", format_utc(h.start_at) + " to " + format_utc(h.end_at));
  item("timezone", "Time zone", h.timezone);
  item("definition_hash", "Definition hash", h.definition_hash);
  item("version", "Version", std::to_string(h.version));
  item("created_by", "Created by", h.created_by);
  std::string ap;
  for (auto& a : h.approved_by) ap += (ap.empty() ? "" : ", ") + a;
  item("approved_by", "Approved by", ap.empty() ? "(no current approval)" : ap);
  item("range", "Range (UTC)", format_utc(d.from) + " to " + format_utc(d.to) + ", buckets of " + bucket_name(d.bucket));
  item("buckets", "Buckets",
       d.bucket_zone == "UTC"
           ? bucket_name(d.bucket) + " of fixed length, starting on UTC " + (d.bucket == 60000 ? "minutes" : "hours")
           : "calendar days in " + d.bucket_zone + ", each from midnight to midnight in that zone (23 or 25 hours "
             "on a day its clocks change)");
  o << "</dl>";
  o << "<table id=\"totals\"><caption>Totals over the range</caption>";
  o << kv_row("granted", "Granted", std::to_string(d.granted)) << kv_row("held", "Held by a fuse", std::to_string(d.held))
    << kv_row("rejected", "Rejected", std::to_string(d.rejected))
    << kv_row("cost_cents", "Cost of grants holding budget (cents)", std::to_string(d.cost_cents)) << "</table>";
  return o.str();
}

double x_of(const Data& d, Millis t) {
  const double span = d.series.empty() ? 1.0 : double(d.series.back().end - d.from);
  return kLeft + (kW - kLeft - kRight) * std::clamp(double(t - d.from) / std::max(1.0, span), 0.0, 1.0);
}

std::string timeline(const Data& d) {
  int64_t top = 1;
  for (auto& b : d.series) top = std::max(top, b.granted + b.held + b.rejected_total());
  const double plot_h = kH - kTop - kBottom, bw = (kW - kLeft - kRight) / double(std::max<size_t>(1, d.series.size()));
  std::ostringstream o;
  o << "<section id=\"timeline\"><h2>Requests over time, by outcome</h2>";
  o << "<p class=\"key\"><span class=\"granted\" style=\"background:#3a8f3a\"></span>granted"
       "<span style=\"background:#d89b00\"></span>held by a fuse<span style=\"background:#c0392b\"></span>rejected"
       "<span style=\"background:#7b1fa2\"></span>fuse event</p>";
  o << "<svg viewBox=\"0 0 " << num(kW) << ' ' << num(kH) << "\" role=\"img\" aria-label=\"Requests over time\">"
    << "<title>Requests per " << bucket_name(d.bucket) << " bucket</title>";
  o << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(kH - kBottom) << "\" x2=\"" << num(kW - kRight) << "\" y2=\""
    << num(kH - kBottom) << "\" stroke=\"#999\"/>";
  o << "<text x=\"" << num(kLeft - 4) << "\" y=\"" << num(kTop + 10) << "\" text-anchor=\"end\">" << top << "</text>";
  o << "<text x=\"" << num(kLeft - 4) << "\" y=\"" << num(kH - kBottom) << "\" text-anchor=\"end\">0</text>";
  for (size_t i = 0; i < d.series.size(); ++i) {
    const auto& b = d.series[i];
    double y = kH - kBottom;
    const double x = kLeft + double(i) * bw;
    for (auto [cls, v] : {std::pair<const char*, int64_t>{"granted", b.granted}, {"held", b.held},
                          {"rejected", b.rejected_total()}}) {
      if (v <= 0) continue;
      const double h = plot_h * double(v) / double(top);
      y -= h;
      o << "<rect class=\"" << cls << "\" x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\""
        << num(std::max(0.5, bw * 0.9)) << "\" height=\"" << num(h) << "\"><title>" << bucket_time(d, b.at) << ": " << v
        << ' ' << cls << "</title></rect>";
    }
  }
  for (auto& f : d.fuse) {
    if (f.at < d.from || f.at >= d.to) continue;
    const double x = x_of(d, f.at);
    o << "<line class=\"fuse\" x1=\"" << num(x) << "\" y1=\"" << num(kTop) << "\" x2=\"" << num(x) << "\" y2=\""
      << num(kH - kBottom) << "\"><title>fuse " << esc(f.batch_no) << " (" << esc(f.kind) << ") at "
      << short_time(f.at) << "</title></line>";
  }
  if (!d.series.empty()) {
    o << "<text x=\"" << num(kLeft) << "\" y=\"" << num(kH - 10) << "\">" << bucket_time(d, d.series.front().at)
      << "</text><text x=\"" << num(kW - kRight) << "\" y=\"" << num(kH - 10) << "\" text-anchor=\"end\">"
      << short_time(d.to) << "</text>";
  }
  o << "</svg>";
  // the figures: one row per bucket that holds anything, a column per reject reason
  std::ostringstream t;
  t << "<table id=\"timeline-figures\"><tr><th class=\"l\">bucket start (" << esc(d.bucket_zone)
    << ")</th><th>granted</th><th>held</th>";
  for (auto& [r, _] : d.reject_reasons) t << "<th>rejected: " << esc(r) << "</th>";
  t << "</tr>";
  for (auto& b : d.series) {
    if (b.granted + b.held + b.rejected_total() == 0) continue;
    t << "<tr data-at=\"" << b.at << "\"><td class=\"l\">" << bucket_time(d, b.at) << "</td><td data-k=\"granted\">"
      << b.granted << "</td><td data-k=\"held\">" << b.held << "</td>";
    for (auto& [r, _] : d.reject_reasons) {
      auto it = b.rejected.find(r);
      t << "<td data-k=\"rejected:" << esc(r) << "\">" << (it == b.rejected.end() ? 0 : it->second) << "</td>";
    }
    t << "</tr>";
  }
  t << "</table>";
  o << figures(t.str()) << "</section>";
  return o.str();
}

std::string budget_burn(const Data& d) {
  std::ostringstream o;
  o << "<section id=\"budget\"><h2>Budget burn</h2>";
  if (!d.authorised_cents) return o.str() + "<p>This activity has no budget.</p></section>";
  const int64_t auth = *d.authorised_cents;
  const Millis start = d.h.start_at, close = activity::window_close(d.h.end_at);
  auto pace = [&](Millis t) {
    return double(auth) * std::clamp(double(t - start) / double(std::max<Millis>(1, close - start)), 0.0, 1.0);
  };
  // cumulative cost at the end of each bucket, starting from what was spent before the range
  std::vector<int64_t> cum;
  int64_t acc = d.cost_before_cents;
  for (auto& b : d.series) cum.push_back(acc += b.cost_cents);
  double top = double(std::max<int64_t>(1, auth));
  for (auto c : cum) top = std::max(top, double(c));
  const double plot_h = kH - kTop - kBottom;
  auto y_of = [&](double v) { return kH - kBottom - plot_h * v / top; };
  const Millis end = d.series.empty() ? d.to : d.series.back().end;
  o << "<p class=\"key\"><span style=\"background:#1565c0\"></span>cost of grants holding budget, cumulative"
       "<span style=\"background:#c0392b\"></span>authorised<span style=\"background:#888\"></span>even pace "
       "over the window</p>";
  o << "<svg viewBox=\"0 0 " << num(kW) << ' ' << num(kH) << "\" role=\"img\" aria-label=\"Budget burn\">"
    << "<title>Budget burn against the authorised line</title>";
  o << "<line class=\"auth\" x1=\"" << num(kLeft) << "\" y1=\"" << num(y_of(double(auth))) << "\" x2=\""
    << num(kW - kRight) << "\" y2=\"" << num(y_of(double(auth))) << "\"><title>authorised " << money(auth)
    << "</title></line>";
  o << "<line class=\"pace\" x1=\"" << num(kLeft) << "\" y1=\"" << num(y_of(pace(d.from))) << "\" x2=\""
    << num(kW - kRight) << "\" y2=\"" << num(y_of(pace(end))) << "\"/>";
  o << "<polyline class=\"burn\" points=\"" << num(x_of(d, d.from)) << ',' << num(y_of(double(d.cost_before_cents)))
    << ' ';
  for (size_t i = 0; i < cum.size(); ++i)
    o << num(x_of(d, d.series[i].end)) << ',' << num(y_of(double(cum[i]))) << ' ';
  o << "\"/><text x=\"" << num(kLeft - 4) << "\" y=\"" << num(y_of(double(auth)) + 4) << "\" text-anchor=\"end\">"
    << money(auth) << "</text></svg>";
  std::ostringstream t;
  t << "<table id=\"budget-figures\">" << kv_row("authorised_cents", "Authorised (cents)", std::to_string(auth))
    << kv_row("consumed_cents", "Consumed (cents)", std::to_string(d.consumed_cents.value_or(0)))
    << kv_row("consumed_share", "Consumed share",
              num(100.0 * double(d.consumed_cents.value_or(0)) / double(std::max<int64_t>(1, auth))) + " %")
    << "</table><table><tr><th class=\"l\">bucket end (" << esc(d.bucket_zone)
    << ")</th><th>cumulative cost (cents)</th><th>even pace (cents)</th></tr>";
  for (size_t i = 0; i < cum.size(); ++i)
    if (d.series[i].cost_cents != 0 || i + 1 == cum.size())
      t << "<tr><td class=\"l\">" << bucket_time(d, d.series[i].end) << "</td><td>" << cum[i] << "</td><td>"
        << int64_t(pace(d.series[i].end)) << "</td></tr>";
  t << "</table>";
  o << figures(t.str()) << "</section>";
  return o.str();
}

std::string stock(const Data& d) {
  std::ostringstream o;
  o << "<section id=\"stock\"><h2>Stock left per prize</h2>";
  std::vector<std::pair<std::string, int64_t>> rows;
  std::vector<int64_t> maxes;
  for (auto& p : d.stock) {
    rows.emplace_back(p.code, p.remain);
    maxes.push_back(p.total);
  }
  o << hbars("Stock left per prize (of its total)", rows, maxes);
  std::ostringstream t;
  t << "<table id=\"stock-figures\"><tr><th class=\"l\">prize</th><th>configured</th><th>total</th><th>remaining</th>"
       "<th>taken</th><th class=\"l\">remaining per bucket</th></tr>";
  for (auto& p : d.stock) {
    std::string per;
    for (auto& [b, r] : p.buckets) per += (per.empty() ? "" : " ") + std::to_string(b) + ":" + std::to_string(r);
    t << "<tr data-prize=\"" << esc(p.code) << "\"><td class=\"l\">" << esc(p.code) << "</td><td data-k=\"configured\">"
      << p.configured << "</td><td data-k=\"total\">" << p.total << "</td><td data-k=\"remain\">" << p.remain
      << "</td><td data-k=\"taken\">" << p.total - p.remain << "</td><td class=\"l\">" << per << "</td></tr>";
  }
  t << "</table>";
  o << figures(t.str()) << "</section>";
  return o.str();
}

std::string counts_section(const std::string& id, const std::string& title, const std::string& empty_text,
                           const std::vector<std::pair<std::string, int64_t>>& rows, const std::string& extra = "") {
  std::ostringstream o;
  o << "<section id=\"" << id << "\"><h2>" << esc(title) << "</h2>";
  if (rows.empty()) {
    o << "<p>" << esc(empty_text) << "</p>";
  } else {
    int64_t mx = 1;
    for (auto& r : rows) mx = std::max(mx, r.second);
    o << hbars(title, rows, std::vector<int64_t>(rows.size(), mx));
  }
  std::ostringstream t;
  t << "<table id=\"" << id << "-figures\">";
  for (auto& [k, v] : rows) t << kv_row(k, k, std::to_string(v));
  t << "</table>" << extra;
  o << figures(t.str()) << "</section>";
  return o.str();
}

std::string fuse(const Data& d) {
  std::ostringstream o;
  o << "<section id=\"fuse\"><h2>Fuse events</h2>";
  if (d.fuse.empty()) return o.str() + "<p>No fuse event.</p></section>";
  o << "<table id=\"fuse-figures\"><tr><th class=\"l\">event</th><th class=\"l\">at (UTC)</th><th class=\"l\">kind</th>"
       "<th class=\"l\">prize</th><th class=\"l\">state</th><th>observed count</th><th>observed amount (cents)</th>"
       "<th class=\"l\">reason</th></tr>";
  for (auto& f : d.fuse)
    o << "<tr data-event=\"" << esc(f.batch_no) << "\"><td class=\"l\">" << esc(f.batch_no) << "</td><td class=\"l\">"
      << short_time(f.at) << "</td><td class=\"l\">" << esc(f.kind) << "</td><td class=\"l\">"
      << esc(f.prize.empty() ? "(activity)" : f.prize) << "</td><td class=\"l\" data-k=\"state\">" << esc(f.state)
      << "</td><td>" << f.observed_count << "</td><td>" << f.observed_amount << "</td><td class=\"l\">" << esc(f.reason)
      << "</td></tr>";
  o << "</table></section>";
  return o.str();
}

std::string reconcile_section(const Data& d) {
  std::ostringstream o;
  o << "<section id=\"reconcile\"><h2>Last reconcile run</h2>";
  if (!d.reconcile) return o.str() + "<p>reconcile has never run on this database.</p></section>";
  const auto& r = *d.reconcile;
  o << "<p>Run " << r.run << " at " << short_time(r.started_at) << " UTC: <span class=\""
    << (r.state == "clean" ? "ok" : "bad") << "\">" << esc(r.state) << "</span>.</p>";
  o << "<table id=\"reconcile-figures\">" << kv_row("run", "Run", std::to_string(r.run))
    << kv_row("state", "State", r.state) << kv_row("checks", "Checks", r.checks)
    << kv_row("diffs_all", "Differences in the run", std::to_string(r.diffs_all))
    << kv_row("diffs_here", "Differences naming this activity", std::to_string(r.diffs_here)) << "</table></section>";
  return o.str();
}

std::string page(const std::string& title, const std::string& body, Millis generated_at) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"" +
         std::string(kCsp) +
         "\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
         "<title>" +
         esc(title) + "</title><style>" + kStyle + "</style></head><body>" + body +
         "<footer>Made by rewardctl report at " + format_utc(generated_at) +
         ". Times are UTC unless a zone is shown; money is in cents unless shown with a decimal point.</footer></body></html>\n";
}

// A small line of the requests per bucket, at most 60 points (buckets are merged to fit).
std::string sparkline(const Data& d) {
  const size_t n = d.series.size(), pts = std::min<size_t>(60, std::max<size_t>(1, n));
  std::vector<int64_t> v(pts, 0);
  for (size_t i = 0; i < n; ++i) v[i * pts / n] += d.series[i].granted + d.series[i].held + d.series[i].rejected_total();
  const int64_t top = std::max<int64_t>(1, *std::max_element(v.begin(), v.end()));
  std::ostringstream o;
  o << "<svg viewBox=\"0 0 120 24\" width=\"120\" height=\"24\" role=\"img\" aria-label=\"requests\"><polyline "
       "class=\"burn\" points=\"";
  for (size_t i = 0; i < pts; ++i)
    o << num(pts == 1 ? 60 : 120.0 * double(i) / double(pts - 1)) << ',' << num(22 - 20.0 * double(v[i]) / double(top))
      << ' ';
  o << "\"/></svg>";
  return o.str();
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string render_activity(const Data& d, Millis generated_at, const std::string& index_href) {
  std::vector<std::pair<std::string, int64_t>> resend{{"pending", d.resend_pending},
                                                      {"pending, due now", d.resend_overdue},
                                                      {"manual", d.resend_manual}};
  std::string resend_table = "<table id=\"resend-figures\"><caption>Resend backlog</caption>";
  for (auto& [k, v] : resend) resend_table += kv_row(k, k, std::to_string(v));
  resend_table += "</table>";
  std::string bills = "<table id=\"bills-figures\"><caption>Delivery bills by state</caption>";
  for (auto& [k, v] : d.bill_states) bills += kv_row(k, k, std::to_string(v));
  bills += "</table>";
  std::string body = header(d, index_href) + timeline(d) + budget_burn(d) + stock(d) +
                     counts_section("rejects", "Reject reasons", "No claim was rejected in the range.", d.reject_reasons) +
                     counts_section("delivery", "Grants by state (delivery)", "No grant yet.", d.grant_states,
                                    bills + resend_table) +
                     fuse(d) + reconcile_section(d);
  return page("rewardctl report: " + d.h.code, body, generated_at);
}

std::string render_index(const std::vector<Data>& all, Millis generated_at) {
  std::ostringstream o;
  o << "<h1>Activities</h1><table id=\"index\"><tr><th class=\"l\">activity</th><th class=\"l\">name</th>"
       "<th class=\"l\">kind</th><th class=\"l\">state</th><th>granted</th><th>held</th><th>rejected</th>"
       "<th>cost (cents)</th><th class=\"l\">requests</th></tr>";
  for (auto& d : all)
    o << "<tr data-activity=\"" << esc(d.h.code) << "\"><td class=\"l\"><a href=\"" << esc(d.h.code) << ".html\">"
      << esc(d.h.code) << "</a></td><td class=\"l\">" << esc(d.h.name) << "</td><td class=\"l\">" << esc(d.h.kind)
      << "</td><td class=\"l\">" << esc(d.h.state) << "</td><td data-k=\"granted\">" << d.granted
      << "</td><td data-k=\"held\">" << d.held << "</td><td data-k=\"rejected\">" << d.rejected
      << "</td><td data-k=\"cost_cents\">" << d.cost_cents << "</td><td class=\"l\">" << sparkline(d) << "</td></tr>";
  o << "</table>";
  if (all.empty()) o << "<p>No activity yet.</p>";
  return page("rewardctl report: activities", o.str(), generated_at);
}

}  // namespace rc::jobs::report
