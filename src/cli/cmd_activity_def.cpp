// activity new --kind K [--code C] [--start T|now] [--end T | --days N] | activity lint FILE
// Writing and checking a definition needs no database: an operator can draft and lint on a laptop,
// and CI can lint every file before anything is created.
#include <CLI/CLI.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "cli/context.hpp"
#include "core/activity/definition.hpp"
#include "core/delivery/channel.hpp"
#include "core/embedded.hpp"

namespace rc::cli {
namespace {

struct {
  std::string kind, file, code, start, end;
  int64_t days = 0;
} activity_def_opt;

std::string kinds() {
  std::string s;
  for (auto& t : embedded::templates()) s += (s.empty() ? "" : ", ") + t.kind;
  return s;
}

// The value of a top-level `key = value  # comment` line of a template ("" when absent), unquoted.
std::string template_value(const std::string& text, const std::string& key) {
  std::smatch m;
  std::regex re("(^|\n)" + key + " *= *\"?([^\"\n #]*)");
  return std::regex_search(text, m, re) ? m[2].str() : "";
}

// Replaces the value of a top-level `key = value  # comment` line, keeping its comment.
std::string with_value(const std::string& text, const std::string& key, const std::string& value) {
  std::regex re("(^|\n)(" + key + " *= *)(\"[^\"\n]*\"|[^ \n]+)");
  return std::regex_replace(text, re, "$1$2\"" + value + "\"", std::regex_constants::format_first_only);
}

// An operator's value echoed in a message: at most 80 bytes of it.
std::string excerpt(const std::string& v) { return v.size() <= 80 ? v : v.substr(0, 77) + "..."; }

Millis parse_time_flag(const std::string& flag, const std::string& v, Millis now) {
  if (flag == "--start" && v == "now") return now / 1000 * 1000;
  auto t = parse_rfc3339(v);
  if (!t)
    throw Error(Errc::usage, flag + " '" + excerpt(v) + "' is not a time with an offset, such as 2025-11-01T00:00:00+08:00" +
                                 (flag == "--start" ? " (or now)" : ""));
  return *t;
}

// t as the template writes it, in its zone. Refused (usage) when that text would not read back as
// the same instant: a year past 9999 (RFC 3339 has four digits), or a zone's early local mean time
// whose offset has seconds that RFC 3339 cannot show.
std::string written(Millis t, const std::string& zone, const std::string& flag) {
  std::string s = format_in_zone(t, zone);  // whole seconds
  auto back = parse_rfc3339(s);
  if (!back || *back != t - ((t % 1000) + 1000) % 1000)
    throw Error(Errc::usage, flag + ": the window's " + (flag == "--start" ? "start" : "end") + " " + format_utc(t) +
                                 " cannot be written as an RFC 3339 time in " + zone +
                                 ": choose a time in the years 1970 to 9999");
  return s;
}

// A template made usable without an editor: --code, and a window from --start (or now) to --end or
// --start + --days, written in the template's time zone.
std::string fill_template(std::string text, Millis now) {
  if (!activity_def_opt.code.empty()) {
    static const std::regex code_re("[a-z0-9_-]{1,64}");
    if (!std::regex_match(activity_def_opt.code, code_re))
      throw Error(Errc::usage, "--code '" + excerpt(activity_def_opt.code) + "' (" + std::to_string(activity_def_opt.code.size()) +
                                   " bytes): use 1 to 64 of a-z 0-9 _ -");
    text = with_value(text, "code", activity_def_opt.code);
  }
  if (activity_def_opt.start.empty() && activity_def_opt.end.empty() && activity_def_opt.days == 0) return text;
  if (!activity_def_opt.end.empty() && activity_def_opt.days > 0) throw Error(Errc::usage, "give --end or --days, not both");
  std::string zone = template_value(text, "timezone");
  Millis start = activity_def_opt.start.empty() ? parse_time_flag("--start", template_value(text, "start"), now)
                                   : parse_time_flag("--start", activity_def_opt.start, now);
  Millis end = activity_def_opt.days > 0     ? start + activity_def_opt.days * 86400000LL
               : activity_def_opt.end.empty() ? parse_time_flag("--end", template_value(text, "end"), now)
                                 : parse_time_flag("--end", activity_def_opt.end, now);
  if (end <= start)
    throw Error(Errc::usage, "the window is empty: end " + format_in_zone(end, zone) + " is not after start " +
                                 format_in_zone(start, zone) + " (give a later --end, or --days)");
  text = with_value(text, "start", written(start, zone, "--start"));
  return with_value(text, "end", written(end, zone, activity_def_opt.days > 0 ? "--days" : "--end"));
}

Exit run_new(Ctx& ctx) {
  for (auto& t : embedded::templates())
    if (t.kind == activity_def_opt.kind) {
      std::string text = fill_template(t.text, ctx.now());
      if (ctx.out.json_mode()) ctx.out.record({{"kind", t.kind}, {"template", text}});
      else std::cout << text;
      return Exit::ok;
    }
  throw Error(Errc::usage, "unknown activity kind '" + activity_def_opt.kind + "': choose one of " + kinds());
}

std::string pad_bytes(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

Exit run_lint(Ctx& ctx) {
  std::string source = activity_def_opt.file == "-" ? "<stdin>" : activity_def_opt.file;
  std::string text = read_input_file(activity_def_opt.file);
  auto r = activity::review_definition(text, source, lint_context(ctx));
  // errors first, then warnings, then infos; within each, in file order
  std::stable_sort(r.findings.begin(), r.findings.end(), [](const activity::Finding& a, const activity::Finding& b) {
    if (a.severity != b.severity) return a.severity < b.severity;
    return (a.line ? a.line : 1 << 30) < (b.line ? b.line : 1 << 30);
  });
  int errors = 0, warnings = 0, infos = 0;
  for (auto& f : r.findings)
    (f.severity == activity::Severity::error ? errors : f.severity == activity::Severity::warning ? warnings : infos)++;

  if (ctx.out.json_mode()) {
    std::vector<json> rows;
    for (auto& f : r.findings)
      rows.push_back({{"severity", activity::severity_name(f.severity)},
                      {"code", f.code},
                      {"path", f.path},
                      {"line", f.line},
                      {"column", f.column},
                      {"message", f.message}});
    ctx.out.rows({}, rows, "finding");
    ctx.out.record({{"type", "summary"}, {"errors", errors}, {"warnings", warnings}, {"infos", infos}});
  } else {
    // file:line:col: SEVERITY  CODE  PATH  MESSAGE, aligned; the location first so editors can jump to it
    std::vector<std::string> where;
    size_t ww = 0, cw = 0, pw = 0;
    for (auto& f : r.findings) {
      where.push_back(source + ":" + (f.line ? std::to_string(f.line) + ":" + std::to_string(f.column) + ":" : ""));
      ww = std::max(ww, where.back().size());
      cw = std::max(cw, f.code.size());
      pw = std::max(pw, f.path.empty() ? 1 : f.path.size());
    }
    for (size_t i = 0; i < r.findings.size(); ++i) {
      auto& f = r.findings[i];
      std::cout << pad_bytes(where[i], ww) << " " << pad_bytes(activity::severity_name(f.severity), 7) << "  " << pad_bytes(f.code, cw)
                << "  " << pad_bytes(f.path.empty() ? "-" : f.path, pw) << "  " << printable(f.message) << "\n";
    }
    auto n = [](int k, const char* one) { return std::to_string(k) + " " + one + (k == 1 ? "" : "s"); };
    std::cout << source << ": " << n(errors, "error") << ", " << n(warnings, "warning") << ", " << n(infos, "info")
              << (errors ? ": fix the errors before `activity create`" : ": ok") << "\n";
  }
  return errors ? Exit::findings : Exit::ok;
}

}  // namespace

void register_activity_def(CLI::App& app, Ctx& ctx) {
  auto* g = activity_group(app);
  auto* n = g->add_subcommand("new", "Print a commented definition template for a kind (direct, lottery, redpack)");
  n->add_option("--kind", activity_def_opt.kind, "direct, lottery or redpack")->required();
  n->add_option("--code", activity_def_opt.code, "Activity code to write into the template");
  n->add_option("--start", activity_def_opt.start, "Start of the window: a time with an offset, or now");
  n->add_option("--end", activity_def_opt.end, "End of the window: a time with an offset");
  n->add_option("--days", activity_def_opt.days, "End the window this many days after the start")
      ->check(CLI::Range(int64_t(1), int64_t(36600)));
  n->callback([&ctx] { ctx.action = [&ctx] { return run_new(ctx); }; });
  auto* l = g->add_subcommand("lint", "Review a definition file without a database; exit 1 when any finding is an error");
  l->add_option("FILE", activity_def_opt.file, "The definition (TOML); - reads standard input")->required();
  l->callback([&ctx] { ctx.action = [&ctx] { return run_lint(ctx); }; });
}

}  // namespace rc::cli
