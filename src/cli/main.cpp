// rewardctl: parsing, one catch, and the exit-code mapping. Everything else is in the command
// files (one per group) and the core library.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <clocale>
#include <cstdlib>
#include <iostream>

#include "cli/command_tree.hpp"
#include "cli/context.hpp"
#include "cli/logging.hpp"
#include "cli/output.hpp"
#include "core/interrupt.hpp"
#include "jobs/drill/workers.hpp"

int main(int argc, char** argv) {
  using namespace rc;
  // drill's worker processes (jobs/drill/workers.hpp): internal, not a command, not in --help
  if (argc == 2 && std::string(argv[1]) == "__drill-worker") return jobs::drill::worker_main();
  // Display widths (wcswidth) need a UTF-8 character type; nothing else depends on the locale.
  std::setlocale(LC_CTYPE, "C.UTF-8");
  cli::Ctx ctx;
  CLI::App app{"rewardctl - operate reward activities (giveaways, lotteries, red packets, batch issuing)\n"
               "Exit codes: `rewardctl help exit-codes`. Manual: man rewardctl."};
  app.name("rewardctl");
  app.fallthrough();  // global options are accepted before or after the subcommand
  app.set_version_flag("-V,--version", cli::version_line(), "Print the version and exit");
  auto* g = app.add_option_group("Global options");
  std::string config, db, output, log_level, log_file, log_format, color, op;
  g->add_option("--config", config, "Config file (default: $REWARDCTL_CONFIG, then ./rewardctl.toml)")
      ->option_text("FILE");
  g->add_option("--db", db, "Database: sqlite:PATH, postgresql://... or a libpq conninfo (default sqlite:rewardctl.db)")
      ->option_text("URL");
  g->add_option("-o,--output", output, "Result format: table or json (one object per line, \"v\":1)")
      ->check(CLI::IsMember({"table", "json"}))
      ->option_text("table|json");
  g->add_option("--log-level", log_level, "trace, debug, info, warn, error or off (default info)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->option_text("LEVEL");
  g->add_option("--log-file", log_file, "Also write logs, and the error that ends a command, to this file")
      ->option_text("PATH");
  g->add_option("--log-format", log_format, "Log lines as text or json (one JSON object per line)")
      ->check(CLI::IsMember({"text", "json"}))
      ->option_text("text|json");
  g->add_option("--color", color, "Colour on standard error: auto (a terminal, unless NO_COLOR is set), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->option_text("WHEN");
  g->add_option("--operator", op, "Who is acting, recorded on every mutating action (default: login name)")
      ->option_text("NAME");
  g->add_flag("-q,--quiet", ctx.flags.quiet, "Only warnings and errors on stderr; no progress");
  cli::register_all(app, ctx);
  cli::show_global_options_everywhere(app);

  cli::setup_early_logging(std::getenv("NO_COLOR"));
  if (argc < 2) {
    std::cerr << cli::short_usage(app);
    return exit_int(Exit::usage);
  }
  try {
    cli::check_command_words(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "rewardctl: " << cli::printable(e.what()) << " (see rewardctl --help)\n";
    return exit_int(Exit::usage);
  } catch (const Error& e) {
    std::cerr << "rewardctl: " << cli::printable(e.what()) << "\n";
    return exit_int(exit_code(e.kind()));
  }
  auto set = [](const std::string& v, std::optional<std::string>& dst) {
    if (!v.empty()) dst = v;
  };
  set(config, ctx.flags.config);
  set(db, ctx.flags.db);
  set(output, ctx.flags.output);
  set(log_level, ctx.flags.log_level);
  set(log_file, ctx.flags.log_file);
  set(log_format, ctx.flags.log_format);
  set(color, ctx.flags.color);
  set(op, ctx.flags.operator_name);
  try {
    ctx.settings = load_settings(ctx.flags, [](const char* n) { return std::getenv(n); });
    cli::setup_logging(ctx.settings);
    ctx.out.set_json(ctx.settings.output == "json");
    ctx.clock = make_clock(std::getenv("REWARDCTL_NOW"));
    install_interrupt_handlers();
    if (!ctx.action) throw Error(Errc::usage, "no command given (see rewardctl --help)");
    return exit_int(ctx.action());
  } catch (const Error& e) {
    cli::log_failure(e.what());
    return exit_int(exit_code(e.kind()));
  } catch (const std::exception& e) {
    cli::log_failure(std::string("internal error: ") + e.what() + " (please report this)");
    return exit_int(Exit::internal);
  }
}
