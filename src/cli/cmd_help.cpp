// help [exit-codes] | version | completion (cmd_completion.cpp)
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <iostream>

#include "cli/command_tree.hpp"
#include "cli/context.hpp"
#include "core/build_info.hpp"

namespace rc::cli {

// "rewardctl 0.1.0 (commit 1a2b3c4d5e6f, schema 1)": the line --version prints.
std::string version_line() {
  auto b = build_info();
  return "rewardctl " + b.version + " (commit " + b.commit + ", schema " + std::to_string(b.schema_version) + ")";
}

void register_help(CLI::App& app, Ctx& ctx) {
  auto* help = app.add_subcommand("help", "Usage, and reference topics: exit-codes")->require_subcommand(0, 1);
  help->callback([&ctx, &app, help] {
    if (!help->get_subcommands().empty()) return;
    ctx.action = [&app] {
      std::cout << short_usage(app);
      return Exit::ok;
    };
  });
  auto* codes = help->add_subcommand("exit-codes", "Print the exit codes every command uses");
  codes->callback([&ctx] {
    ctx.action = [&ctx] {
      std::vector<json> rows;
      for (auto& e : exit_table()) rows.push_back({{"code", exit_int(e.code)}, {"name", e.name}, {"meaning", e.meaning}});
      ctx.out.rows({{"code", "CODE"}, {"name", "NAME"}, {"meaning", "MEANING"}}, rows, "exit_code");
      return Exit::ok;
    };
  });
  auto* version = app.add_subcommand(
      "version", "Print the version, the build commit, the schema version it expects and the library versions");
  version->callback([&ctx] {
    ctx.action = [&ctx] {
      auto b = build_info();
      b.libraries.emplace_back("cli11", CLI11_VERSION);
      b.libraries.emplace_back("fmt", std::to_string(FMT_VERSION / 10000) + "." +
                                          std::to_string(FMT_VERSION / 100 % 100) + "." +
                                          std::to_string(FMT_VERSION % 100));
      json libs = json::object();
      for (auto& [name, v] : b.libraries) libs[name] = v;
      json j{{"version", b.version}, {"commit", b.commit}, {"schema_version", b.schema_version}};
      if (ctx.out.json_mode()) {
        j["libraries"] = libs;
        ctx.out.record(j);
      } else {
        ctx.out.record(j);
        std::vector<json> rows;
        for (auto& [name, v] : b.libraries) rows.push_back({{"library", name}, {"version", v}});
        ctx.out.text("");
        ctx.out.rows({{"library", "LIBRARY"}, {"version", "VERSION"}}, rows);
      }
      return Exit::ok;
    };
  });
}

}  // namespace rc::cli
