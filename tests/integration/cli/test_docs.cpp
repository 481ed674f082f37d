// Documentation is part of the feature: every command and every option that --help shows is in the
// man page, and the README names the two set-up commands that .ci/run uses.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "support/harness.hpp"

namespace {

struct Help {
  std::vector<std::string> subcommands;
  std::set<std::string> options;
};

Help parse_help(const std::string& text) {
  Help h;
  std::stringstream ss(text);
  std::string line;
  bool in_subs = false;
  static const std::regex sub_re("^  ([a-z][a-z0-9-]*)\\s");
  static const std::regex opt_re("(--[a-z][a-z0-9-]*)");
  while (std::getline(ss, line)) {
    if (line.rfind("Subcommands:", 0) == 0) {
      in_subs = true;
      continue;
    }
    if (line.empty() || (line[0] != ' ')) in_subs = false;
    std::smatch m;
    if (in_subs && std::regex_search(line, m, sub_re)) h.subcommands.push_back(m[1]);
    // option definitions start with '-' after the indentation
    auto first = line.find_first_not_of(' ');
    if (!in_subs && first != std::string::npos && line[first] == '-') {
      for (std::sregex_iterator it(line.begin(), line.end(), opt_re), end; it != end; ++it) h.options.insert((*it)[1]);
    }
  }
  return h;
}

void walk(const std::vector<std::string>& path, std::vector<std::pair<std::string, std::set<std::string>>>& out) {
  auto args = path;
  args.push_back("--help");
  auto r = rt::run(args);
  REQUIRE(r.rc == 0);
  auto h = parse_help(r.out);
  std::string name;
  for (auto& p : path) name += (name.empty() ? "" : " ") + p;
  out.push_back({name, h.options});
  for (auto& s : h.subcommands) {
    auto next = path;
    next.push_back(s);
    walk(next, out);
  }
}

}  // namespace

TEST_CASE("docs: every command and option in --help is in the man page") {
  std::string man = rt::read_file(std::string(REWARDCTL_SOURCE_DIR) + "/man/rewardctl.1.scd");
  REQUIRE_FALSE(man.empty());
  std::vector<std::pair<std::string, std::set<std::string>>> cmds;
  walk({}, cmds);
  CHECK(cmds.size() > 10);
  for (auto& [name, opts] : cmds) {
    CAPTURE(name);
    bool documented = name.empty() || man.find("## " + name) != std::string::npos;
    CHECK_MESSAGE(documented, "command '" << name << "' is missing from man/rewardctl.1.scd");
    for (auto& o : opts) {
      if (o == "--help") continue;
      CHECK_MESSAGE(man.find(o) != std::string::npos, "option " << o << " of '" << name << "' is missing from the man page");
    }
  }
}

TEST_CASE("docs: the README holds the two set-up commands and .ci/run calls the test one") {
  std::string src = REWARDCTL_SOURCE_DIR;
  std::string readme = rt::read_file(src + "/README.md");
  CHECK(readme.find("scripts/dev demo") != std::string::npos);
  CHECK(readme.find("scripts/dev test") != std::string::npos);
  CHECK(rt::read_file(src + "/.ci/run").find("scripts/dev test") != std::string::npos);
}

TEST_CASE("docs: no test case name holds a semicolon (ctest would split it into names that run nothing)") {
  const std::string src = REWARDCTL_SOURCE_DIR;
  const std::regex name("TEST_CASE\\(\"([^\"]*)\"");
  for (const char* dir : {"/tests/integration", "/tests/unit"})
    for (auto& f : std::filesystem::recursive_directory_iterator(src + dir)) {
      if (!f.is_regular_file()) continue;
      const std::string text = rt::read_file(f.path().string());
      for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) {
        CAPTURE(f.path().string());
        CHECK((*it)[1].str().find(';') == std::string::npos);
      }
    }
}
