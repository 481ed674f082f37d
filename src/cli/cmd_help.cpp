// help exit-codes | version
#include <CLI/CLI.hpp>

#include "cli/context.hpp"

namespace rc::cli {

void register_help(CLI::App& app, Ctx& ctx) {
  auto* help = app.add_subcommand("help", "Reference topics: exit-codes")->require_subcommand(1);
  auto* codes = help->add_subcommand("exit-codes", "Print the exit codes every command uses");
  codes->callback([&ctx] {
    ctx.action = [&ctx] {
      std::vector<json> rows;
      for (auto& e : exit_table()) rows.push_back({{"code", exit_int(e.code)}, {"name", e.name}, {"meaning", e.meaning}});
      ctx.out.rows({{"code", "CODE"}, {"name", "NAME"}, {"meaning", "MEANING"}}, rows, "exit_code");
      return Exit::ok;
    };
  });
  auto* version = app.add_subcommand("version", "Print the version of rewardctl and its schema");
  version->callback([&ctx] {
    ctx.action = [&ctx] {
      ctx.out.record({{"version", REWARDCTL_VERSION}});
      return Exit::ok;
    };
  });
}

}  // namespace rc::cli
