// activity diff CODE [--from N] [--to M]: what changes between two definition versions
// (core/activity/diff.hpp). Versions are proposed with activity update, reviewed with activity
// approve|reject and listed by activity history.
#include <CLI/CLI.hpp>

#include "cli/context.hpp"
#include "core/activity/diff.hpp"

namespace rc::cli {
namespace {

struct {
  std::string code;
  int64_t from = 0, to = 0;  // 0: the default
} activity_version_opt;

json side_json(const activity::VersionSide& s) {
  return {{"version", s.version}, {"state", s.state}, {"definition_hash", s.hash}};
}

Exit run_diff(Ctx& ctx) {
  auto st = ctx.open_store();
  auto d = activity::diff_versions(*st, activity_version_opt.code, activity_version_opt.from ? std::optional<int64_t>(activity_version_opt.from) : std::nullopt,
                                   activity_version_opt.to ? std::optional<int64_t>(activity_version_opt.to) : std::nullopt);
  std::vector<json> rows;
  for (auto& c : d.changes)
    rows.push_back({{"section", c.section}, {"key", c.key}, {"change", c.change}, {"field", c.field},
                    {"from", c.from}, {"to", c.to}, {"note", c.note}});
  if (ctx.out.json_mode()) {
    ctx.out.record({{"code", d.code}, {"from", side_json(d.from)}, {"to", side_json(d.to)}, {"changes", rows}});
    return Exit::ok;
  }
  ctx.out.text(d.code + ": version " + std::to_string(d.from.version) + " (" + d.from.state + ") -> version " +
               std::to_string(d.to.version) + " (" + d.to.state + "), " + std::to_string(rows.size()) + " change(s)");
  if (!rows.empty())
    ctx.out.rows({{"section", "SECTION"}, {"key", "KEY"}, {"change", "CHANGE"}, {"field", "FIELD"}, {"from", "FROM"},
                  {"to", "TO"}, {"note", "NOTE"}},
                 rows);
  return Exit::ok;
}

}  // namespace

void register_activity_version(CLI::App& app, Ctx& ctx) {
  auto* g = activity_group(app);
  auto* diff = g->add_subcommand(
      "diff", "What changes between two definition versions (default: the running one -> the one in review)");
  diff->add_option("CODE", activity_version_opt.code, "Activity code")->required();
  diff->add_option("--from", activity_version_opt.from, "Older version (default: the running one)")->check(CLI::Range(int64_t(1), INT64_MAX));
  diff->add_option("--to", activity_version_opt.to, "Newer version (default: the one in review)")->check(CLI::Range(int64_t(1), INT64_MAX));
  diff->callback([&ctx] { ctx.action = [&ctx] { return run_diff(ctx); }; });
}

}  // namespace rc::cli
