#pragma once
// Small pieces of CLI11 wiring that several command files share.
#include <CLI/CLI.hpp>

#include "cli/context.hpp"

namespace rc::cli {

// Runs f(ctx) as the command's action when subcommand c is the one chosen.
template <class F>
void on(CLI::App* c, Ctx& ctx, F f) {
  c->callback([&ctx, f] { ctx.action = [&ctx, f] { return f(ctx); }; });
}

// The --dry-run flag of a command that changes something, into `flag`.
inline void add_dry_run(CLI::App* c, bool& flag) {
  c->add_flag("--dry-run", flag, "Check and report what would change; write nothing");
}

}  // namespace rc::cli
