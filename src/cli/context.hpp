#pragma once
// What every command handler gets: layered settings, the clock, the output and a way to open the
// store. Handlers return an exit code or throw rc::Error.
#include <functional>
#include <memory>

#include "cli/output.hpp"
#include "core/activity/definition.hpp"
#include "core/clock.hpp"
#include "core/config.hpp"
#include "core/store/clock_sync.hpp"
#include "core/store/store.hpp"

namespace CLI {
class App;
}

namespace rc::cli {

struct Ctx {
  Overrides flags;
  Settings settings;
  std::unique_ptr<Clock> clock;
  Output out;
  std::function<Exit()> action;  // set by the subcommand that was chosen, run after parsing

  // Opens the configured database and refuses one whose schema is not exactly this binary's.
  // cancel_on_signal: StoreOptions::cancel_on_signal (off for serve's sessions)
  std::unique_ptr<store::Store> open_store(bool cancel_on_signal = true);
  // For read-only commands (report, record show, ledger, reconcile's checks): the hot standby that
  // db.read_url names when one is set (PostgreSQL only; schema checked; its replay lag logged),
  // else the database, as open_store. docs/scaling.md §3.
  std::unique_ptr<store::Store> open_read_store();
  // Opens without the schema check (db migrate / db status). create: may create the SQLite file.
  std::unique_ptr<store::Store> open_store_unchecked(bool create, bool cancel_on_signal = true);
  Millis now() const { return clock->now_ms(); }
  // The store options the settings give (the lease's and the drill workers' own connections too).
  store::StoreOptions store_options(bool create = false, bool cancel_on_signal = true) const;
  // The host's clock against the database's, read when the first PostgreSQL store was opened (and
  // from then on the clock of every decision: core/store/clock_sync.hpp); none on SQLite and under
  // REWARDCTL_NOW. A difference beyond db.max_clock_skew_ms is warned about on every command.
  std::optional<store::ClockReading> clock_reading;
  // For jobs that end or expire things (expire): Error(config) naming both clocks when the host's
  // clock and the database's differ by more than db.max_clock_skew_ms. Nothing is written then.
  void require_clocks_agree(const std::string& what) const;

 private:
  void sync_clock(store::Store& st);
};

// Whether a PostgreSQL server is a standby (in recovery), and how far behind it is: 0 when it has
// replayed everything it received, else how long ago the last transaction it replayed committed on
// the primary (none: nothing replayed yet, or no standby). What a read from it shows is the
// primary's state about that long ago.
struct StandbyLag {
  bool in_recovery = false;
  std::optional<int64_t> replay_lag_ms;  // 0 when everything received is replayed
  bool replay_paused = false;             // pg_wal_replay_pause(): the standby shows a moment that stays
};
StandbyLag standby_lag(store::Store& s);

// Every command group, in the order --help lists them (register.cpp).
void register_all(CLI::App& app, Ctx& ctx);
// Each command group registers its subcommands; the callback only records ctx.action.
void register_db(CLI::App& app, Ctx& ctx);
void register_help(CLI::App& app, Ctx& ctx);
void register_import(CLI::App& app, Ctx& ctx);  // import-qualifications, qualification (cmd_import.cpp)
void register_activity_def(CLI::App& app, Ctx& ctx);  // activity new | lint (cmd_activity_def.cpp)
void register_activity(CLI::App& app, Ctx& ctx);
void register_claim(CLI::App& app, Ctx& ctx);
void register_serve(CLI::App& app, Ctx& ctx);  // serve (cmd_serve.cpp)
void register_reconcile(CLI::App& app, Ctx& ctx);  // reconcile, reconcile show | list (cmd_reconcile.cpp)
void register_list_issue(CLI::App& app, Ctx& ctx);  // list-issue (cmd_list_issue.cpp)
void register_fuse(CLI::App& app, Ctx& ctx);  // fuse-scan, fuse list | show | release | confirm | block | unblock
void register_completion(CLI::App& app, Ctx& ctx);  // completion bash|zsh|fish (cmd_completion.cpp)
void register_jobs(CLI::App& app, Ctx& ctx);     // expire, jobs history | locks (cmd_jobs.cpp)
void register_resend(CLI::App& app, Ctx& ctx);   // resend, resend list | retry | abandon (cmd_resend.cpp)
void register_report(CLI::App& app, Ctx& ctx);   // report (cmd_report.cpp)
void register_drill(CLI::App& app, Ctx& ctx);    // drill (cmd_drill.cpp)
// activity blacklist | gray | stock | budget | change (cmd_activity_live.cpp)
void register_activity_live(CLI::App& app, Ctx& ctx);
void register_activity_version(CLI::App& app, Ctx& ctx);  // activity diff (cmd_activity_version.cpp)
// "rewardctl 0.1.0 (commit 1a2b3c4d5e6f, schema 2)": what --version prints (cmd_help.cpp).
std::string version_line();

// The text of a file named on the command line; "-" reads standard input. Error(no_input) when it
// is missing or unreadable.
std::string read_input_file(const std::string& path);
// Consent for an irreversible action (offline, reverse, revoke): given when `given` (--yes or
// --dry-run), or when the operator types "y" to `question` on a terminal. Without a terminal to ask
// on (cron, a pipe, CI) it throws Error(usage) saying --yes is needed; a "no" throws Error(findings).
// Nothing has been changed when it throws.
void confirm_irreversible(bool given, const std::string& what, const std::string& question);
// Free text an operator typed that goes into the database (--reason, --comment, --source): refused
// with Error(usage) naming `what` when it is empty (and required), longer than `max` bytes, or not
// valid UTF-8 (PostgreSQL would refuse it, SQLite would store it). Control characters are kept:
// tables and logs show them escaped.
void check_text(const std::string& v, const std::string& what, size_t max, bool required);
constexpr size_t kMaxReasonBytes = 500;  // --reason and --comment
constexpr size_t kMaxNameBytes = 200;    // a code or number naming a row: ACTIVITY, RECORD, BILL
// Parses and lints a definition named `source` (a file, "activity CODE"): every finding goes to the
// log (errors as ERROR lines naming source:line:column, the field path and the code), and any error
// is Error(data) (65) saying nothing was written.
activity::Definition reviewed_definition(const Ctx& ctx, const std::string& text, const std::string& source);
// Lint context of this host: the channels its config defines, plus the built-in ledger and outbox.
activity::LintContext lint_context(const Ctx& ctx);

// The one `activity` group shared by several command files: created by whichever registers first.
CLI::App* activity_group(CLI::App& app);

}  // namespace rc::cli
