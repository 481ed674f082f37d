// report ACTIVITY [--html FILE] [--from T] [--to T] [--bucket 1m|1h|1d] | report --html DIR
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "cli/context.hpp"
#include "cli/time_flag.hpp"
#include "jobs/report/report.hpp"
#include "jobs/report/html.hpp"
#include "util/atomic_file.hpp"

namespace rc::cli {
namespace {

namespace rep = jobs::report;

struct {
  std::string activity, html, from, to, bucket;
} report_opt;
std::vector<CLI::Option*> text_opts;  // given with an empty value: a usage error, not "not given"

std::optional<Millis> range_flag(const std::string& v, const char* flag) {
  if (v.empty()) return std::nullopt;
  return time_flag(v, flag, "2026-12-01T00:00:00+08:00");
}

json pairs(const std::vector<std::pair<std::string, int64_t>>& v) {
  json o = json::object();
  for (auto& [k, n] : v) o[k] = n;
  return o;
}

// The same figures as the page, for scripts.
json to_json(const rep::Data& d) {
  const auto& h = d.h;
  json series = json::array();
  for (auto& b : d.series) {
    json rej = json::object();
    for (auto& [k, n] : b.rejected) rej[k] = n;
    series.push_back({{"at", format_utc(b.at)}, {"local", format_in_zone(b.at, d.bucket_zone)}, {"end", format_utc(b.end)},
                      {"granted", b.granted}, {"held", b.held}, {"rejected", rej}, {"cost_cents", b.cost_cents}});
  }
  json stock = json::array();
  for (auto& p : d.stock) {
    json buckets = json::array();
    for (auto& [b, r] : p.buckets) buckets.push_back({{"bucket", b}, {"remain", r}});
    stock.push_back({{"prize", p.code}, {"configured", p.configured}, {"total", p.total}, {"remain", p.remain},
                     {"buckets", buckets}});
  }
  json fuse = json::array();
  for (auto& f : d.fuse)
    fuse.push_back({{"event", f.batch_no}, {"kind", f.kind}, {"state", f.state}, {"reason", f.reason},
                    {"prize", f.prize.empty() ? json(nullptr) : json(f.prize)}, {"at", format_utc(f.at)},
                    {"observed_count", f.observed_count}, {"observed_amount", f.observed_amount}});
  json recon = nullptr;
  if (d.reconcile)
    recon = {{"run", d.reconcile->run}, {"state", d.reconcile->state}, {"checks", d.reconcile->checks},
             {"diffs", d.reconcile->diffs_all}, {"diffs_here", d.reconcile->diffs_here},
             {"started_at", format_utc(d.reconcile->started_at)}};
  return {{"type", "report"},
          {"activity", h.code},
          {"name", h.name},
          {"kind", h.kind},
          {"state", h.state},
          {"timezone", h.timezone},
          {"start_at", format_utc(h.start_at)},
          {"end_at", format_utc(h.end_at)},
          {"definition_hash", h.definition_hash},
          {"version", h.version},
          {"created_by", h.created_by},
          {"approved_by", h.approved_by},
          {"from", format_utc(d.from)},
          {"to", format_utc(d.to)},
          {"bucket", rep::bucket_name(d.bucket)},
          {"bucket_zone", d.bucket_zone},
          {"granted", d.granted},
          {"held", d.held},
          {"rejected", d.rejected},
          {"cost_cents", d.cost_cents},
          {"series", series},
          {"budget", d.authorised_cents ? json{{"authorised_cents", *d.authorised_cents},
                                              {"consumed_cents", d.consumed_cents.value_or(0)}}
                                        : json(nullptr)},
          {"stock", stock},
          {"reject_reasons", pairs(d.reject_reasons)},
          {"grant_states", pairs(d.grant_states)},
          {"bill_states", pairs(d.bill_states)},
          {"resend", {{"pending", d.resend_pending}, {"overdue", d.resend_overdue}, {"manual", d.resend_manual}}},
          {"fuse", fuse},
          {"reconcile", recon}};
}

rep::Options options(Ctx& ctx) {
  for (auto* op : text_opts)
    if (op->count() && op->as<std::string>().empty()) throw Error(Errc::usage, op->get_name() + " is empty");
  rep::Options o;
  o.from = range_flag(report_opt.from, "--from");
  o.to = range_flag(report_opt.to, "--to");
  if (o.from && o.to && *o.from >= *o.to) throw Error(Errc::usage, "--from must be before --to");
  if (!report_opt.bucket.empty()) o.bucket = rep::parse_bucket(report_opt.bucket);
  o.now = ctx.now();
  return o;
}

Exit one_activity(Ctx& ctx) {
  rep::Options o = options(ctx);
  o.activity = report_opt.activity;
  auto st = ctx.open_read_store();  // (a hot standby when db.read_url names one)
  const rep::Data d = rep::collect(*st, o);
  if (!report_opt.html.empty()) {
    util::write_file_atomic(report_opt.html, rep::render_activity(d, ctx.now()));
    spdlog::info("report {}: wrote {}", d.h.code, report_opt.html);
  }
  json j = to_json(d);
  j["html"] = report_opt.html.empty() ? json(nullptr) : json(report_opt.html);
  if (ctx.out.json_mode()) {
    ctx.out.record(j);
  } else {
    ctx.out.record({{"activity", d.h.code}, {"state", d.h.state}, {"from", j["from"]}, {"to", j["to"]},
                    {"bucket", j["bucket"]}, {"granted", d.granted}, {"held", d.held}, {"rejected", d.rejected},
                    {"cost_cents", d.cost_cents}, {"fuse_events", int64_t(d.fuse.size())},
                    {"reconcile", d.reconcile ? json(d.reconcile->state) : json("never run")}, {"html", j["html"]}});
  }
  return Exit::ok;
}

Exit index(Ctx& ctx) {
  if (report_opt.html.empty()) throw Error(Errc::usage, "report without ACTIVITY needs --html DIR (the index page and one page per activity)");
  const rep::Options base = options(ctx);
  auto st = ctx.open_read_store();  // (a hot standby when db.read_url names one)
  std::vector<rep::Data> all;
  for (auto& code : rep::activity_codes(*st)) {
    rep::Options o = base;
    o.activity = code;
    all.push_back(rep::collect(*st, o));
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(report_opt.html, ec);
  if (ec || !fs::is_directory(report_opt.html))
    throw Error(Errc::output_failed, "--html " + report_opt.html + ": cannot create the directory" +
                                         (ec ? ": " + ec.message() : std::string(": a file of that name exists")));
  const fs::path dir(report_opt.html);
  for (auto& d : all) util::write_file_atomic((dir / (d.h.code + ".html")).string(), rep::render_activity(d, ctx.now(), "index.html"));
  util::write_file_atomic((dir / "index.html").string(), rep::render_index(all, ctx.now()));
  spdlog::info("report: wrote {} page(s) and index.html in {}", all.size(), report_opt.html);
  json codes = json::array();
  for (auto& d : all) codes.push_back(d.h.code);
  ctx.out.record({{"type", "index"}, {"dir", report_opt.html}, {"index", (dir / "index.html").string()},
                  {"activities", int64_t(all.size())}, {"pages", codes}});
  return Exit::ok;
}

}  // namespace

void register_report(CLI::App& app, Ctx& ctx) {
  auto* r = app.add_subcommand("report", "One activity at a glance, as a self-contained HTML page or JSON; "
                                         "without ACTIVITY an index of all of them");
  r->add_option("ACTIVITY", report_opt.activity, "The activity's code (omit it with --html DIR for every activity)");
  text_opts = {
      r->add_option("--html", report_opt.html, "Write the page to FILE (with ACTIVITY), or index.html and CODE.html to DIR"),
      r->add_option("--from", report_opt.from, "Start of the range, RFC 3339 (default: the activity's first request)"),
      r->add_option("--to", report_opt.to, "End of the range, exclusive, RFC 3339 (default: just after its last request)"),
      r->add_option("--bucket", report_opt.bucket, "Bar width of the timeline: 1m, 1h or 1d (a calendar day in the activity's zone; default: chosen from the range)")};
  r->callback([&ctx] {
    ctx.action = [&ctx] { return report_opt.activity.empty() ? index(ctx) : one_activity(ctx); };
  });
}

}  // namespace rc::cli
