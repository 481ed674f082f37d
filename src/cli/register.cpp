// The command groups, in the order --help lists them.
#include <CLI/CLI.hpp>

#include "cli/context.hpp"

namespace rc::cli {

void register_jobs(CLI::App& app, Ctx& ctx);    // expire, jobs history | locks (cmd_jobs.cpp)
void register_resend(CLI::App& app, Ctx& ctx);
void register_report(CLI::App& app, Ctx& ctx);  // report (cmd_report.cpp)
void register_drill(CLI::App& app, Ctx& ctx);   // drill (cmd_drill.cpp)  // resend, resend list | retry | abandon (cmd_resend.cpp)
// activity blacklist | gray | stock | budget | change (cmd_activity_live.cpp)
void register_activity_live(CLI::App& app, Ctx& ctx);
void register_activity_version(CLI::App& app, Ctx& ctx);  // activity diff (cmd_activity_version.cpp)

void register_all(CLI::App& app, Ctx& ctx) {
  register_db(app, ctx);
  register_activity(app, ctx);
  register_activity_def(app, ctx);
  register_activity_live(app, ctx);
  register_activity_version(app, ctx);
  register_claim(app, ctx);
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
