#pragma once
// Support for the job suites: rows written directly (the activity commands belong to other suites),
// a rewardctl run in the background, and polling the database for what it has committed.
#include <functional>
#include <map>
#include <string>
#include <sys/types.h>
#include <vector>

#include "support/harness.hpp"

namespace rt {

// An activity row in `state` whose window ends at end_at (epoch ms), with one prize of `stock`
// units in one bucket, when budget_cents > 0 a budget, and the status-log row of its creation.
// Returns its id.
int64_t make_activity(const TestDb& db, const std::string& code, const std::string& state, int64_t end_at,
                      int64_t stock = 10, int64_t budget_cents = 0);
// n unused qualifications of activity `code` (users q1..qN) expiring at expires_at (epoch ms).
void add_due_qualifications(const TestDb& db, const std::string& code, int64_t n, int64_t expires_at,
                            const std::string& prefix = "q");

// Starts `rewardctl --db URL args...` in the background (stdout/stderr to files in db.dir()).
pid_t spawn(const TestDb& db, const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {});
// Starts argv (argv[0] a path) in the background in directory cwd, its stdout and stderr appended to
// (or, with truncate, written afresh to) the files out and err, without REWARDCTL_CONFIG and
// REWARDCTL_NOW and with env added. Returns its pid.
pid_t spawn_program(const std::vector<std::string>& argv, const std::string& cwd, const std::string& out,
                    const std::string& err, bool truncate, const std::map<std::string, std::string>& env = {});
// Polls `sql` (a single count) until it is at least `at_least`; false after 60 s.
bool wait_for(const TestDb& db, const std::string& sql, int64_t at_least);
// Polls pred every 20 ms; false after `seconds`.
bool eventually(const std::function<bool()>& pred, int seconds = 10);

}  // namespace rt
