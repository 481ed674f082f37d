// Text an operator types that ends up in the database or on a terminal, attacked as a hostile user
// would: bytes that are not UTF-8, huge values, terminal escapes; and the consent question asked on
// a real terminal. The same answers on both backends (PostgreSQL refuses invalid UTF-8 that SQLite
// would store), and nothing written when refused.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "support/harness.hpp"
#include "support/seed.hpp"

using nlohmann::json;

namespace {

// A live activity "txt", stored through the CLI.
void live_activity(const rt::TestDb& db) {
  rt::Spec s;
  s.code = "txt";
  rt::seed(db, s);
}

int64_t log_rows(const rt::TestDb& db) { return db.count("SELECT COUNT(*) FROM status_log"); }

}  // namespace

TEST_CASE("text input: a --reason or --comment that is not UTF-8 or too long is refused at the edge (64)") {
  rt::TestDb db;
  db.migrate();
  live_activity(db);
  db.ok({"claim", "txt", "--user", "u1", "--biz-id", "b1"});
  const std::string bad = "refund \xff\xfe";
  const std::string huge(501, 'r');
  auto before = log_rows(db);
  for (auto args : std::vector<std::vector<std::string>>{
           {"activity", "pause", "txt", "--reason", bad},
           {"activity", "pause", "txt", "--reason", huge},
           {"activity", "offline", "txt", "--reason", bad, "--yes"},
           {"activity", "offline", "txt", "--reason", "", "--yes"},
           {"reverse", "--biz-id", "b1", "--reason", bad, "--yes"},
           {"reverse", "--biz-id", "b1", "--reason", huge, "--yes"},
           {"activity", "approve", "txt", "--as", "product", "--comment", bad},
           {"activity", "stock", "txt", "--prize", "p1", "--add", "1", "--reason", bad},
           {"activity", "budget", "txt", "--raise", "100", "--reason", huge},
           {"activity", "change", "reject", "1", "--reason", bad},
       }) {
    auto r = db.ok(args, 64);
    CAPTURE(args.at(1));
    bool named = r.err.find("--reason") != std::string::npos || r.err.find("--comment") != std::string::npos;
    CHECK(named);
  }
  CHECK(log_rows(db) == before);
  CHECK(db.count("SELECT COUNT(*) FROM grants WHERE state = 'success'") == 1);
  // control characters are kept (and shown escaped in tables): a reason may quote what a user typed
  db.ok({"activity", "pause", "txt", "--reason", std::string(500, 'r')});
  db.ok({"activity", "resume", "txt", "--reason", "line1\nline2"});
  CHECK(db.count("SELECT COUNT(*) FROM status_log WHERE reason = $1", {std::string("line1\nline2")}) == 1);
}

TEST_CASE("text input: the operator name follows the user id rules, from the flag, the variable or the login") {
  rt::TestDb db;
  db.migrate();
  live_activity(db);
  auto before = log_rows(db);
  auto r = db.ok({"activity", "pause", "txt", "--operator", "eve\xff"}, 64);
  CHECK(r.err.find("the operator name is not valid UTF-8") != std::string::npos);
  r = db.ok({"activity", "pause", "txt"}, 64, {{"REWARDCTL_OPERATOR", "eve\x1b[2J"}});
  CHECK(r.err.find("the operator name holds a control character") != std::string::npos);
  CHECK(r.err.find('\x1b') == std::string::npos);
  db.ok({"activity", "pause", "txt", "--operator", std::string(65, 'e')}, 64);
  CHECK(log_rows(db) == before);
  // a login name that breaks them (USER is anyone's to set) is replaced by the user id, not an error
  db.ok({"activity", "list"}, 0, {{"USER", "ev\xffil"}, {"REWARDCTL_OPERATOR", ""}});
  db.ok({"activity", "pause", "txt", "--reason", "odd login"}, 0, {{"USER", "ev\x1bil"}, {"REWARDCTL_OPERATOR", ""}});
  CHECK(db.count("SELECT COUNT(*) FROM status_log WHERE actor = $1", {"uid" + std::to_string(geteuid())}) == 1);
  db.ok({"activity", "resume", "txt"});
  // trimmed like every identifier
  db.ok({"activity", "pause", "txt", "--operator", "  dave "});
  CHECK(db.count("SELECT COUNT(*) FROM status_log WHERE actor = 'dave'") == 1);
}

TEST_CASE("text input: an activity code that cannot exist is not found (67) on both backends") {
  rt::TestDb db;
  db.migrate();
  live_activity(db);
  for (auto code : {std::string("txt\xff"), std::string("TXT"), std::string(65, 'a'), std::string("x\x1b[2J")}) {
    auto r = db.ok({"activity", "show", code}, 67);
    CHECK(r.err.find('\x1b') == std::string::npos);
    db.ok({"activity", "history", code}, 67);
    db.ok({"qualification", "count", code}, 67);
  }
}

TEST_CASE("text input: a record, bill, batch or claimed activity that is not UTF-8 is a usage error (64) on both backends") {
  rt::TestDb db;
  db.migrate();
  live_activity(db);
  for (auto args : std::vector<std::vector<std::string>>{
           {"claim", "txt\xff", "--user", "u1", "--biz-id", "b1"},
           {"record", "show", "R\xff"},
           {"reverse", "R\xff", "--reason", "x", "--yes"},
           {"record", "complete", "B\xff", "--ok"},
           {"resend", "retry", "B\xff"},
           {"list-issue", "status", "L\xff"},
           {"list-issue", "cancel", "L\xff", "--yes"},
       }) {
    auto r = db.ok(args, 64);
    CHECK(r.err.find("is not valid UTF-8") != std::string::npos);
  }
  CHECK(db.count("SELECT COUNT(*) FROM grants") == 0);
  // valid UTF-8 that names nothing: not found, the same on both backends
  db.ok({"record", "show", "R\xc3\xa9"}, 67);
  db.ok({"claim", "t\xc3\xa9", "--user", "u1", "--biz-id", "b1"}, 1);
}

TEST_CASE("consent: on a terminal the question is asked with names escaped, and only y goes ahead") {
  rt::TestDb db;
  db.migrate();
  live_activity(db);
  db.ok({"claim", "txt", "--user", "u1", "--biz-id", "b1"});
  // script(1) gives rewardctl a pseudo-terminal and types the input into it
  auto on_tty = [&](const std::string& args, const std::string& typed) {
    std::string cmd = std::string("'") + REWARDCTL_BIN + "' " + args;
    return rt::run_program({"script", "-qec", cmd, "/dev/null"}, {{"SHELL", "/bin/bash"}, {"REWARDCTL_DB", db.url()}},
                           typed);
  };
  auto no = on_tty("reverse --biz-id b1 --reason refund", "n\n");
  INFO(no.out << no.err);
  CHECK(no.rc == 1);
  CHECK(no.out.find("Reverse grant ") != std::string::npos);
  CHECK(no.out.find("not confirmed: nothing changed") != std::string::npos);
  CHECK(db.count("SELECT COUNT(*) FROM grants WHERE state = 'success'") == 1);
  auto yes = on_tty("reverse --biz-id b1 --reason refund", "y\n");
  INFO(yes.out << yes.err);
  CHECK(yes.rc == 0);
  CHECK(db.count("SELECT COUNT(*) FROM grants WHERE state = 'reversed'") == 1);
  // a bill number holding an escape is shown escaped in the question (it does not exist: 1 or 67 after "y")
  auto esc = on_tty("resend abandon $'B\\x1b[2J' --reason gone", "n\n");
  INFO(esc.out << esc.err);
  CHECK(esc.out.find("Abandon bill B\\x1b[2J?") != std::string::npos);
  CHECK(esc.out.find("B\x1b[2J") == std::string::npos);
}
