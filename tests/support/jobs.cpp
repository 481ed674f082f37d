#include "support/jobs.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace rt {

int64_t make_activity(const TestDb& db, const std::string& code, const std::string& state, int64_t end_at,
                      int64_t stock, int64_t budget_cents) {
  auto s = db.open();
  int64_t id = 0;
  s->transact(rc::store::TxMode::write, [&](rc::store::Tx& tx) {
    id = tx.query("INSERT INTO activity (code, name, kind, state, definition, definition_hash, timezone, start_at, "
                  "end_at, created_by, created_at, updated_at) VALUES ($1, $1, 'direct', $2, '{}', 'x', 'UTC', 0, $3, "
                  "'test', 0, 0) RETURNING id",
                  {code, state, end_at})[0]
             .i64(0);
    int64_t item = tx.query("INSERT INTO item (activity_id, code, kind, unit_cost_cents, channel) VALUES ($1, 'thing', "
                            "'coupon', 100, 'ledger') RETURNING id",
                            {id})[0]
                       .i64(0);
    int64_t prize = tx.query("INSERT INTO prize (activity_id, code, item_id, amount, stock_total) VALUES ($1, 'p1', $2, "
                             "1, $3) RETURNING id",
                             {id, item, stock})[0]
                        .i64(0);
    tx.exec("INSERT INTO stock (prize_id, bucket, total, remain) VALUES ($1, 0, $2, $2)", {prize, stock});
    if (budget_cents > 0)
      tx.exec("INSERT INTO budget (activity_id, authorised_cents, consumed_cents) VALUES ($1, $2, 0)", {id, budget_cents});
    // the status-log row of its creation, as every activity has (the reconcile oracle checks it)
    tx.exec("INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, created_at) "
            "VALUES ('activity', $1, NULL, $2, 'test', 0)",
            {id, state});
  });
  return id;
}

void add_due_qualifications(const TestDb& db, const std::string& code, int64_t n, int64_t expires_at,
                            const std::string& prefix) {
  db.open()->exec(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < CAST($2 AS BIGINT)) "
      "INSERT INTO qualification (activity_id, user_id, status, expires_at, created_at, updated_at) "
      "SELECT (SELECT id FROM activity WHERE code = $1), CAST($4 AS TEXT) || CAST(i AS TEXT), 'unused', CAST($3 AS BIGINT), 0, 0 FROM n",
      {code, n, expires_at, prefix});
}

pid_t spawn(const TestDb& db, const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv_s{REWARDCTL_BIN, "--db", db.url()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  return spawn_program(argv_s, db.dir(), "spawn.out", "spawn.err", false, env);
}

pid_t spawn_program(const std::vector<std::string>& argv_s, const std::string& cwd, const std::string& out,
                    const std::string& err, bool truncate, const std::map<std::string, std::string>& env) {
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(cwd.c_str()) != 0) _exit(127);
    const int mode = O_WRONLY | O_CREAT | (truncate ? O_TRUNC : O_APPEND);
    int o = open(out.c_str(), mode, 0644), e = open(err.c_str(), mode, 0644);
    dup2(o, 1);
    dup2(e, 2);
    unsetenv("REWARDCTL_CONFIG");
    unsetenv("REWARDCTL_NOW");
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

bool eventually(const std::function<bool()>& pred, int seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

bool wait_for(const TestDb& db, const std::string& sql, int64_t at_least) {
  auto s = db.open();
  return eventually([&] { return s->query(sql)[0].i64(0) >= at_least; }, 60);
}

}  // namespace rt
