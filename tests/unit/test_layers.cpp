// The layers of src/ (docs/design.md §7): every #include runs down, never up or sideways across
// the line. base <- util <- core <- jobs <- cli, and core <- serve <- cli; inside core, the engine sits above activity,
// delivery and store, and activity above store and delivery. A wrong include fails here, naming
// the file, the line and the rule, before it becomes a cycle nobody can undo.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

bool starts(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// The rule an include from file `from` (path under src/) of `to` (as written) breaks, or "".
std::string wrong_way(const std::string& from, const std::string& to) {
  if (to.find('/') == std::string::npos) return "";  // a sibling by bare name: not used in src/
  struct Rule {
    const char* from;
    const char* to;
    const char* why;
  };
  static const std::vector<Rule> rules{
      {"base/", "util/", "base is the bottom layer"},
      {"base/", "core/", "base is the bottom layer"},
      {"base/", "jobs/", "base is the bottom layer"},
      {"base/", "cli/", "base is the bottom layer"},
      {"util/", "core/", "util is below core"},
      {"util/", "jobs/", "util is below jobs"},
      {"util/", "cli/", "util is below cli"},
      {"core/", "jobs/", "core is below jobs"},
      {"core/", "cli/", "core is below cli"},
      {"jobs/", "cli/", "jobs are below cli"},
      // serve sits beside jobs, over core: the CLI starts it; neither core nor jobs know it
      {"base/", "serve/", "base is the bottom layer"},
      {"util/", "serve/", "util is below serve"},
      {"core/", "serve/", "core is below serve"},
      {"jobs/", "serve/", "serve and jobs are apart"},
      {"serve/", "jobs/", "serve and jobs are apart"},
      {"serve/", "cli/", "serve is below cli"},
  };
  for (auto& r : rules)
    if (starts(from, r.from) && starts(to, r.to)) return r.why;
  // inside core: engine above activity, delivery, store and core's own top; activity above delivery
  // and store; the rest (top, store, delivery) include neither activity nor engine
  if (starts(to, "core/engine/") && starts(from, "core/") && !starts(from, "core/engine/"))
    return "only the engine includes core/engine";
  if (starts(to, "core/activity/") && starts(from, "core/") && !starts(from, "core/engine/") &&
      !starts(from, "core/activity/"))
    return "core/activity is included by the engine and above only";
  // inside jobs: the runner's runtime/ and the CSV input/ are below every command
  if ((starts(from, "jobs/runtime/") || starts(from, "jobs/input/")) && starts(to, "jobs/") &&
      !starts(to, "jobs/runtime/") && !starts(to, "jobs/input/"))
    return "jobs/runtime and jobs/input are below the commands";
  return "";
}

}  // namespace

TEST_CASE("layers: the rule itself tells right from wrong") {
  CHECK(wrong_way("util/hash.cpp", "core/error.hpp") != "");
  CHECK(wrong_way("util/hash.cpp", "base/error.hpp") == "");
  CHECK(wrong_way("base/error.cpp", "util/hash.hpp") != "");
  CHECK(wrong_way("core/engine/claim.cpp", "jobs/runtime/lease.hpp") != "");
  CHECK(wrong_way("core/activity/live.cpp", "core/engine/engine.hpp") != "");
  CHECK(wrong_way("core/engine/catalog.cpp", "core/activity/definition.hpp") == "");
  CHECK(wrong_way("core/store/store.cpp", "core/activity/window.hpp") != "");
  CHECK(wrong_way("core/audit.cpp", "core/engine/reason.hpp") != "");
  CHECK(wrong_way("jobs/list_issue/run.cpp", "core/engine/engine.hpp") == "");
  CHECK(wrong_way("jobs/list_issue/run.cpp", "cli/output.hpp") != "");
  CHECK(wrong_way("cli/main.cpp", "jobs/runtime/runner.hpp") == "");
  CHECK(wrong_way("jobs/runtime/runner.cpp", "jobs/expire/expire.hpp") != "");
  CHECK(wrong_way("jobs/input/input.cpp", "jobs/import/rows.hpp") != "");
  CHECK(wrong_way("jobs/expire/expire.cpp", "jobs/runtime/runner.hpp") == "");
  CHECK(wrong_way("serve/server.cpp", "core/engine/engine.hpp") == "");
  CHECK(wrong_way("serve/server.cpp", "cli/context.hpp") != "");
  CHECK(wrong_way("core/engine/claim.cpp", "serve/api.hpp") != "");
  CHECK(wrong_way("cli/cmd_serve.cpp", "serve/server.hpp") == "");
}

TEST_CASE("layers: every include in src/ runs down (docs/design.md §7)") {
  const std::filesystem::path src = std::filesystem::path(REWARDCTL_SOURCE_DIR) / "src";
  const std::regex inc(R"(^\s*#\s*include\s+"([^"]+)\")");
  int files = 0, includes = 0;
  for (auto& f : std::filesystem::recursive_directory_iterator(src)) {
    if (!f.is_regular_file()) continue;
    const auto ext = f.path().extension();
    if (ext != ".cpp" && ext != ".hpp") continue;
    ++files;
    const std::string from = std::filesystem::relative(f.path(), src).generic_string();
    std::ifstream in(f.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, inc)) continue;
      ++includes;
      const std::string why = wrong_way(from, m[1].str());
      if (!why.empty()) FAIL_CHECK("src/" << from << ":" << n << ": includes \"" << m[1].str() << "\": " << why);
    }
  }
  CHECK(files > 100);  // the walk saw the tree, not an empty directory
  CHECK(includes > 500);
}
