// The README's serve block runs as printed (in an empty directory, bash -e, the built rewardctl
// first on PATH), on a free port instead of 8080, and its claim is granted.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "support/harness.hpp"

TEST_CASE("readme: the serve block runs as printed and its curl claim is granted") {
  std::string readme = rt::read_file(std::string(REWARDCTL_SOURCE_DIR) + "/README.md");
  auto at = readme.find("## Online: serve");
  REQUIRE(at != std::string::npos);
  auto open = readme.find("```sh\n", at);
  auto close = readme.find("```", open + 6);
  REQUIRE(close != std::string::npos);
  std::string block = readme.substr(open + 6, close - open - 6);
  // a port of its own (8080 may be taken where the tests run): one the kernel just handed out
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  int port = ntohs(a.sin_port);
  ::close(fd);
  for (size_t p; (p = block.find("8080")) != std::string::npos;) block.replace(p, 4, std::to_string(port));
  rt::TestDb db;
  std::string dir = rt::make_temp_dir();
  std::string bin = REWARDCTL_BIN;
  std::map<std::string, std::string> env{{"PATH", bin.substr(0, bin.rfind('/')) + ":" + std::getenv("PATH")}};
  if (rt::is_pg()) env["REWARDCTL_DB"] = db.url();
  if (rt::is_pooled()) env["REWARDCTL_DB_POOLER"] = "transaction";
  auto r = rt::run_program({"bash", "-e", "-c", block}, env, "", dir);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.rc == 0);
  auto from = r.out.find("{\"code\"");
  REQUIRE(from != std::string::npos);
  auto j = nlohmann::json::parse(r.out.substr(from, r.out.find('\n', from) - from), nullptr, false);
  CHECK(j["code"] == 0);
  CHECK(j["data"]["bizId"] == "click-10001-1");
  CHECK(j["data"]["status"] == "success");
}
