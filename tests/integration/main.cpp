// The integration suite runs once per backend: ctest passes --rc-backend=sqlite|postgres.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rc-backend=", 13) == 0) setenv("REWARDCTL_TEST_BACKEND", argv[i] + 13, 1);
    else args.push_back(argv[i]);
  }
  spdlog::set_level(spdlog::level::warn);  // in-process engines log every claim at info
  doctest::Context ctx;
  ctx.applyCommandLine(int(args.size()), args.data());
  return ctx.run();
}
