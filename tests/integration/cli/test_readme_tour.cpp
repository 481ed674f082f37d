// The README's tour runs as printed: its lines are taken from README.md and run one by one by bash
// in an empty directory, with the built rewardctl first on PATH (issue 13, point 1). On the
// PostgreSQL suite REWARDCTL_DB points at the test database; on SQLite the default file is used.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <cstdlib>
#include <sstream>

#include "support/harness.hpp"

namespace {

std::vector<std::string> tour_lines() {
  std::string readme = rt::read_file(std::string(REWARDCTL_SOURCE_DIR) + "/README.md");
  auto at = readme.find("## A tour");
  REQUIRE(at != std::string::npos);
  auto open = readme.find("```sh\n", at);
  REQUIRE(open != std::string::npos);
  auto close = readme.find("```", open + 6);
  REQUIRE(close != std::string::npos);
  std::stringstream ss(readme.substr(open + 6, close - open - 6));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(ss, line))
    if (!line.empty() && line[0] != '#') out.push_back(line);
  return out;
}

std::string dir_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

}  // namespace

TEST_CASE("readme: the tour runs top to bottom, as printed, in an empty directory") {
  auto lines = tour_lines();
  REQUIRE(lines.size() >= 15);
  rt::TestDb db;
  std::string dir = rt::make_temp_dir();
  std::map<std::string, std::string> env{{"PATH", dir_of(REWARDCTL_BIN) + ":" + std::getenv("PATH")}};
  if (rt::is_pg()) env["REWARDCTL_DB"] = db.url();
  for (auto& line : lines) {
    REQUIRE(line.rfind("rewardctl ", 0) == 0);  // the tour is rewardctl commands only, nothing to set up
    auto r = rt::run_program({"bash", "-c", line}, env, "", dir);
    INFO(line << "\nstdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.rc == 0);
    if (line.find("claim tour_packets --user u1") != std::string::npos) CHECK(r.out.find("rejected") == std::string::npos);
  }
  // what the tour did, read back: the claims were granted and the reversal returned u1's packet
  auto s = rt::run({"activity", "show", "tour_packets", "-o", "json"}, env, "", dir);
  REQUIRE(s.rc == 0);
  auto j = nlohmann::json::parse(rt::lines(s.out).at(0));
  CHECK(j["state"] == "offline");
  auto g = rt::run({"record", "show", "--biz-id", "order-42", "-o", "json"}, env, "", dir);
  REQUIRE(g.rc == 0);
  CHECK(nlohmann::json::parse(g.out)["state"] == "reversed");
  auto q = rt::run({"record", "show", "--biz-id", "order-41", "-o", "json"}, env, "", dir);
  REQUIRE(q.rc == 0);
  CHECK(nlohmann::json::parse(q.out)["state"] == "success");
  struct stat sb;
  CHECK((::stat((dir + "/rewardctl.db").c_str(), &sb) == 0) == !rt::is_pg());
  std::string rm = "rm -rf '" + dir + "'";
  (void)!system(rm.c_str());
}
