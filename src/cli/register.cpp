// The command groups, in the order --help lists them.
#include <CLI/CLI.hpp>

#include "cli/context.hpp"

namespace rc::cli {

void register_all(CLI::App& app, Ctx& ctx) {
  register_db(app, ctx);
  register_activity(app, ctx);
  register_activity_def(app, ctx);
  register_claim(app, ctx);
  register_import(app, ctx);
  register_reconcile(app, ctx);
  register_help(app, ctx);
}

}  // namespace rc::cli
