// The command groups, in the order --help lists them.
#include <CLI/CLI.hpp>

#include "cli/context.hpp"

namespace rc::cli {

void register_all(CLI::App& app, Ctx& ctx) {
  register_db(app, ctx);
  register_activity(app, ctx);
  register_activity_def(app, ctx);
  register_activity_live(app, ctx);
  register_activity_version(app, ctx);
  register_claim(app, ctx);
  register_serve(app, ctx);
  register_import(app, ctx);
  register_reconcile(app, ctx);
  register_jobs(app, ctx);
  register_resend(app, ctx);
  register_list_issue(app, ctx);
  register_fuse(app, ctx);
  register_report(app, ctx);
  register_drill(app, ctx);
  register_help(app, ctx);
  register_completion(app, ctx);
}

}  // namespace rc::cli
