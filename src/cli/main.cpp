// rewardctl: parsing, one catch, and the exit-code mapping. Everything else is in the command
// files (one per group) and the core library.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>

#include "cli/context.hpp"
#include "cli/logging.hpp"
#include "core/interrupt.hpp"

int main(int argc, char** argv) {
  using namespace rc;
  cli::Ctx ctx;
  CLI::App app{"rewardctl - operate reward activities (giveaways, lotteries, red packets, batch issuing)\n"
               "Exit codes: `rewardctl help exit-codes`. Manual: man rewardctl."};
  app.name("rewardctl");
  app.fallthrough();  // global options are accepted before or after the subcommand
  app.require_subcommand(1);
  auto* g = app.add_option_group("Global options");
  std::string config, db, output, log_level, log_file, op;
  g->add_option("--config", config, "Config file (default: $REWARDCTL_CONFIG, then ./rewardctl.toml)");
  g->add_option("--db", db, "Database: sqlite:PATH, postgresql://... or a libpq conninfo (default sqlite:rewardctl.db)");
  g->add_option("-o,--output", output, "Result format: table or json (one object per line, \"v\":1)")
      ->check(CLI::IsMember({"table", "json"}));
  g->add_option("--log-level", log_level, "trace, debug, info, warn, error or off (default info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  g->add_option("--log-file", log_file, "Also write logs to this file");
  g->add_option("--operator", op, "Who is acting, recorded on every mutating action (default: login name)");
  g->add_flag("-q,--quiet", ctx.flags.quiet, "Only warnings and errors on stderr; no progress");
  cli::register_all(app, ctx);

  cli::setup_early_logging();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "rewardctl: " << e.what() << " (see rewardctl --help)\n";
    return exit_int(Exit::usage);
  }
  auto set = [](const std::string& v, std::optional<std::string>& dst) {
    if (!v.empty()) dst = v;
  };
  set(config, ctx.flags.config);
  set(db, ctx.flags.db);
  set(output, ctx.flags.output);
  set(log_level, ctx.flags.log_level);
  set(log_file, ctx.flags.log_file);
  set(op, ctx.flags.operator_name);
  try {
    ctx.settings = load_settings(ctx.flags, [](const char* n) { return std::getenv(n); });
    cli::setup_logging(ctx.settings);
    ctx.out.set_json(ctx.settings.output == "json");
    ctx.clock = make_clock(std::getenv("REWARDCTL_NOW"));
    install_interrupt_handlers();
    if (!ctx.action) throw Error(Exit::usage, "no command given (see rewardctl --help)");
    return exit_int(ctx.action());
  } catch (const Error& e) {
    spdlog::default_logger()->flush();
    std::cerr << "rewardctl: " << e.what() << "\n";
    return exit_int(e.code());
  } catch (const std::exception& e) {
    std::cerr << "rewardctl: internal error: " << e.what() << " (please report this)\n";
    return exit_int(Exit::internal);
  }
}
