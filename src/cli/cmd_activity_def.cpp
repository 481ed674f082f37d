// activity new --kind K | activity lint FILE
// Writing and checking a definition needs no database: an operator can draft and lint on a laptop,
// and CI can lint every file before anything is created.
#include <CLI/CLI.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/context.hpp"
#include "core/activity/definition.hpp"
#include "core/delivery/channel.hpp"
#include "core/embedded.hpp"

namespace rc::cli {
namespace {

struct {
  std::string kind;
  std::string file;
} opt;

std::string kinds() {
  std::string s;
  for (auto& t : embedded::templates()) s += (s.empty() ? "" : ", ") + t.kind;
  return s;
}

Exit run_new(Ctx& ctx) {
  for (auto& t : embedded::templates())
    if (t.kind == opt.kind) {
      if (ctx.out.json_mode()) ctx.out.record({{"kind", t.kind}, {"template", t.text}});
      else std::cout << t.text;
      return Exit::ok;
    }
  throw Error(Exit::usage, "unknown activity kind '" + opt.kind + "': choose one of " + kinds());
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

Exit run_lint(Ctx& ctx) {
  std::string source = opt.file == "-" ? "<stdin>" : opt.file;
  std::string text = read_input_file(opt.file);
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
      std::cout << pad(where[i], ww) << " " << pad(activity::severity_name(f.severity), 7) << "  " << pad(f.code, cw)
                << "  " << pad(f.path.empty() ? "-" : f.path, pw) << "  " << f.message << "\n";
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
  n->add_option("--kind", opt.kind, "direct, lottery or redpack")->required();
  n->callback([&ctx] { ctx.action = [&ctx] { return run_new(ctx); }; });
  auto* l = g->add_subcommand("lint", "Review a definition file without a database; exit 1 when any finding is an error");
  l->add_option("FILE", opt.file, "The definition (TOML); - reads standard input")->required();
  l->callback([&ctx] { ctx.action = [&ctx] { return run_lint(ctx); }; });
}

}  // namespace rc::cli
