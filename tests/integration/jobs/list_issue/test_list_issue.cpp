// list-issue through the real binary on the backend under test: plan (dedupe, rejects, fit check),
// the approval rules, a batch larger than stock, the dry-run twins, a definition changed after
// planning, cancel mid-run, SIGKILL at random points and rerun, and two processes sharing a batch.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "util/hash.hpp"
#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

namespace {

// user_id,note header plus users u<from>..u<to-1>
std::string users_csv(int64_t from, int64_t to) {
  std::string s = "user_id,note\n";
  for (int64_t i = from; i < to; ++i) s += "u" + std::to_string(i) + ",x\n";
  return s;
}

std::string plan(const TestDb& db, const std::string& file, std::vector<std::string> extra = {}, int rc = 0) {
  std::vector<std::string> a{"list-issue", "plan", "act", file, "--prize", "p1", "-o", "json", "--operator", "alice"};
  a.insert(a.end(), extra.begin(), extra.end());
  auto j = rt::last_json(db.ok(a, rc));
  return j["batch"].is_null() ? "" : j["batch"].get<std::string>();
}

json status(const TestDb& db, const std::string& batch) {
  return rt::last_json(db.ok({"list-issue", "status", batch, "-o", "json"}));
}

// What the database says about a batch, and the invariants every state of it must keep.
struct Counts {
  int64_t pending, issued, rejected, failed, cancelled, grants, stock_left, credited;
};
Counts check_batch(const TestDb& db, const std::string& batch, int64_t stock) {
  // Every figure from one snapshot (one read transaction: REPEATABLE READ on PostgreSQL): a run
  // killed with SIGKILL may leave a COMMIT it had sent that the server finishes after the process is
  // gone, and figures read one statement at a time would straddle it.
  Counts c{};
  int64_t items_with_grant = 0, stock_left = 0, all_grants = 0, logged = 0;
  auto st = db.open();
  st->transact(rc::store::TxMode::read, [&](rc::store::Tx& tx) {
    auto count = [&](const std::string& sql, const rc::store::Params& p) { return tx.query(sql, p).rows.at(0).i64(0); };
    auto n = [&](const std::string& state) {
      return count("SELECT count(*) FROM list_item i JOIN list_batch b ON b.id = i.batch_id WHERE b.batch_no = $1 "
                   "AND i.state = $2",
                   {batch, state});
    };
    c = Counts{n("pending"), n("issued"), n("rejected"), n("failed"), n("cancelled"), 0, 0, 0};
    c.grants = count("SELECT count(*) FROM grants g JOIN list_item i ON i.id = g.list_item_id JOIN list_batch b "
                     "ON b.id = i.batch_id WHERE b.batch_no = $1",
                     {batch});
    c.stock_left = stock_left = count("SELECT COALESCE(sum(remain), 0) FROM stock", {});
    c.credited = count("SELECT count(*) FROM ledger_entry e JOIN grants g ON g.bill_no = e.bill_no JOIN list_item i "
                       "ON i.id = g.list_item_id JOIN list_batch b ON b.id = i.batch_id WHERE b.batch_no = $1",
                       {batch});
    items_with_grant = count("SELECT count(*) FROM list_item i JOIN list_batch b ON b.id = i.batch_id JOIN grants g ON "
                             "g.record_code = i.record_code AND g.list_item_id = i.id AND g.user_id = i.user_id WHERE "
                             "b.batch_no = $1 AND i.state IN ('issued', 'failed')",
                             {batch});
    all_grants = count("SELECT count(*) FROM grants", {});
    logged = count("SELECT count(*) FROM status_log s JOIN list_item i ON i.id = s.entity_id JOIN list_batch b ON "
                   "b.id = i.batch_id WHERE s.entity = 'list_item' AND b.batch_no = $1 AND s.from_state = 'pending'",
                   {batch});
  });
  // one grant per issued item and none for the others; its record code is on the item
  CHECK(c.grants == c.issued + c.failed);
  CHECK(items_with_grant == c.issued + c.failed);
  // nothing oversold: every unit of stock is either left or in a grant
  CHECK(stock_left + all_grants == stock);
  // every item change has its status-log row
  CHECK(logged == c.issued + c.rejected + c.failed + c.cancelled);
  return c;
}

std::string approved_batch(const TestDb& db, const std::string& file, std::vector<std::string> extra = {}) {
  auto b = plan(db, file, extra);
  db.ok({"list-issue", "approve", b, "--operator", "bob"});
  return b;
}

// A live activity with `stock` units of p1, and an approved batch of users u0..u<users-1>.
std::string seeded_batch(TestDb& db, int64_t stock, int64_t users, std::vector<std::string> extra = {}) {
  db.migrate();
  Spec s;
  s.stock = stock;
  seed(db, s);
  write_file(db.dir(), "l.csv", users_csv(0, users));
  return approved_batch(db, db.dir() + "/l.csv", extra);
}

pid_t spawn_run(const TestDb& db, const std::string& batch, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{REWARDCTL_BIN, "--db", db.url(), "list-issue", "run", batch, "--progress", "none"};
  args.insert(args.end(), extra.begin(), extra.end());
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    unsetenv("REWARDCTL_CONFIG");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(REWARDCTL_BIN, argv.data());
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int64_t finished(const TestDb& db, const std::string& batch) {
  return db.count("SELECT count(*) FROM list_item i JOIN list_batch b ON b.id = i.batch_id WHERE b.batch_no = $1 "
                  "AND i.state <> 'pending'",
                  {batch});
}

}  // namespace

TEST_CASE("list-issue: plan dedupes, rejects bad rows and stores the batch with its checksum and hash") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 100;
  s.budget = 100000;
  seed(db, s);
  write_file(db.dir(), "l.csv", "user_id,note\nu1,a\nu2,b\nu1,again\n,empty\nu3,c\n");
  auto before = db.count("SELECT count(*) FROM list_item");
  SUBCASE("a rejected row over --max-rejects: exit 65, nothing stored, the rejects file names the line") {
    auto r = db.rc({"list-issue", "plan", "act", db.dir() + "/l.csv", "--prize", "p1"});
    CHECK(r.rc == 65);
    CHECK(r.err.find("over --max-rejects 0") != std::string::npos);
    CHECK(db.count("SELECT count(*) FROM list_batch") == 0);
    CHECK(read_file(db.dir() + "/l.csv.rejects.csv").find("5,user_id is empty") != std::string::npos);
  }
  SUBCASE("within --max-rejects: stored, deduped, exit 3") {
    auto r = db.ok({"list-issue", "plan", "act", db.dir() + "/l.csv", "--prize", "p1", "--max-rejects", "1", "-o",
                    "json", "--operator", "alice"},
                   3);
    auto j = rt::last_json(r);
    CHECK(j["users"] == 3);
    CHECK(j["rejected"] == 1);
    CHECK(j["duplicates"] == 1);
    CHECK(j["cost_cents"] == 300);
    CHECK(j["fits"] == true);
    const std::string b = j["batch"];
    CHECK(db.count("SELECT count(*) FROM list_item i JOIN list_batch b ON b.id = i.batch_id WHERE b.batch_no = $1 "
                   "AND i.state = 'pending'",
                   {b}) == 3);
    CHECK(db.count("SELECT count(*) FROM list_batch WHERE batch_no = $1 AND state = 'planned' AND total = 3 AND "
                   "length(file_sha256) = 64 AND definition_hash = (SELECT definition_hash FROM activity)",
                   {b}) == 1);
    CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'list_batch' AND to_state = 'planned'") == 1);
    auto st = status(db, b);
    CHECK(st["state"] == "planned");
    CHECK(st["pending"] == 3);
    CHECK(st["total"] == 3);
    auto items = lines(db.ok({"list-issue", "items", b, "-o", "json"}).out);
    REQUIRE(items.size() == 3);
    CHECK(json::parse(items[0])["user"] == "u1");
    CHECK(json::parse(items[2])["line"] == 6);
    CHECK(lines(db.ok({"list-issue", "list", "-o", "json"}).out).size() == 1);
  }
  SUBCASE("more users than stock: exit 65 and nothing stored, unless --allow-partial") {
    write_file(db.dir(), "big.csv", users_csv(0, 101));
    auto r = db.rc({"list-issue", "plan", "act", db.dir() + "/big.csv", "--prize", "p1", "-o", "json"});
    CHECK(r.rc == 65);
    CHECK(rt::last_json(r)["fits"] == false);
    CHECK(r.err.find("100 left") != std::string::npos);
    CHECK(db.count("SELECT count(*) FROM list_item") == before);
    auto b = plan(db, db.dir() + "/big.csv", {"--allow-partial"});
    CHECK(db.count("SELECT count(*) FROM list_batch WHERE batch_no = $1 AND fits = 0", {b}) == 1);
  }
  SUBCASE("more cost than budget: exit 65") {
    write_file(db.dir(), "b.csv", users_csv(0, 2));
    db.open()->exec("UPDATE budget SET consumed_cents = authorised_cents - 150");
    auto r = db.rc({"list-issue", "plan", "act", db.dir() + "/b.csv", "--prize", "p1"});
    CHECK(r.rc == 65);
    CHECK(db.count("SELECT count(*) FROM list_batch") == 0);
  }
  SUBCASE("--dry-run reports the same and stores nothing") {
    write_file(db.dir(), "ok.csv", users_csv(0, 10));
    auto j = rt::last_json(db.ok({"list-issue", "plan", "act", db.dir() + "/ok.csv", "--prize", "p1", "--dry-run", "-o", "json"}));
    CHECK(j["users"] == 10);
    CHECK(j["stored"] == false);
    CHECK(db.count("SELECT count(*) FROM list_batch") == 0);
    CHECK(db.count("SELECT count(*) FROM list_item") == 0);
  }
  SUBCASE("unknown prize or activity: exit 67 (not found) naming it") {
    write_file(db.dir(), "ok.csv", users_csv(0, 2));
    auto r = db.rc({"list-issue", "plan", "act", db.dir() + "/ok.csv", "--prize", "nope"});
    CHECK(r.rc == 67);
    CHECK(r.err.find("no prize 'nope'") != std::string::npos);
    CHECK(db.rc({"list-issue", "plan", "zzz", db.dir() + "/ok.csv", "--prize", "p1"}).rc == 67);
    CHECK(db.rc({"list-issue", "plan", "act", db.dir() + "/missing.csv", "--prize", "p1"}).rc == 66);
  }
}

TEST_CASE("list-issue: plan refuses disguised user ids (invisible, not NFC): rejects naming the line, exit 65, nothing stored") {
  TestDb db;
  db.migrate();
  Spec s;
  s.stock = 100;
  s.budget = 100000;
  seed(db, s);
  const std::string nfc = "caf\xC3\xA9", nfd = "cafe\xCC\x81";
  write_file(db.dir(), "d.csv",
             "user_id,note\nu1,a\nevil\xE2\x80\x8B,b\n" + nfd + ",c\n\xE2\x80\x8B,d\nab\xE2\x80\xAE" "cd,e\n" + nfc +
                 ",f\n\xE7\x94\xA8\xE6\x88\xB7\xE4\xB8\x80,g\n");
  auto r = db.rc({"list-issue", "plan", "act", db.dir() + "/d.csv", "--prize", "p1"});
  INFO(r.all());
  CHECK(r.rc == 65);
  CHECK(r.err.find("4 rows rejected, over --max-rejects 0") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM list_batch") == 0);
  CHECK(db.count("SELECT count(*) FROM list_item") == 0);
  const std::string rej = read_file(db.dir() + "/d.csv.rejects.csv");
  CHECK(rej.find(",3,user_id holds an invisible character U+200B at character 5 (byte 4)") != std::string::npos);
  CHECK(rej.find(",4,\"user_id is not in Unicode NFC (character 4, byte 3, U+0301 combines") != std::string::npos);
  CHECK(rej.find(",5,user_id holds an invisible character U+200B at character 1 (byte 0)") != std::string::npos);
  CHECK(rej.find(",6,user_id holds an invisible character U+202E at character 3 (byte 2)") != std::string::npos);
  // within --max-rejects the clean users are planned, stored as sent, and issued under those bytes
  auto j = rt::last_json(db.ok({"list-issue", "plan", "act", db.dir() + "/d.csv", "--prize", "p1", "--max-rejects", "4",
                                "-o", "json", "--operator", "alice"},
                               3));
  CHECK(j["users"] == 3);
  CHECK(j["rejected"] == 4);
  const std::string b = j["batch"];
  CHECK(db.count("SELECT count(*) FROM list_item WHERE user_id IN ('u1', $1, $2)", {nfc, std::string("用户一")}) == 3);
  CHECK(db.count("SELECT count(*) FROM list_item") == 3);
  db.ok({"list-issue", "approve", b, "--operator", "bob"});
  db.ok({"list-issue", "run", b, "--progress", "none"});
  CHECK(db.count("SELECT count(*) FROM grants WHERE user_id IN ('u1', $1, $2)", {nfc, std::string("用户一")}) == 3);
  CHECK(db.count("SELECT count(*) FROM grants") == 3);
}

TEST_CASE("list-issue: approval rules") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  write_file(db.dir(), "l.csv", users_csv(0, 5));
  auto b = plan(db, db.dir() + "/l.csv");
  // the planner may not approve; nothing runs before approval
  auto r = db.rc({"list-issue", "approve", b, "--operator", "alice"});
  CHECK(r.rc == 77);
  CHECK(r.err.find("planned by alice") != std::string::npos);
  r = db.rc({"list-issue", "run", b});
  CHECK(r.rc == 77);
  CHECK(r.err.find("not approved") != std::string::npos);
  // the dry-run twin changes nothing
  db.ok({"list-issue", "approve", b, "--operator", "bob", "--dry-run"});
  CHECK(status(db, b)["state"] == "planned");
  db.ok({"list-issue", "approve", b, "--operator", "bob"});
  CHECK(status(db, b)["approved_by"] == "bob");
  CHECK(db.rc({"list-issue", "approve", b, "--operator", "carol"}).rc == 1);  // already approved
  // the approval is bound to the batch as planned
  db.open()->exec("UPDATE list_batch SET total = total + 1 WHERE batch_no = $1", {b});
  r = db.rc({"list-issue", "run", b});
  CHECK(r.rc == 77);
  CHECK(r.err.find("does not match what bob approved") != std::string::npos);
  db.open()->exec("UPDATE list_batch SET total = total - 1 WHERE batch_no = $1", {b});
  // cancelling is final: without a terminal to ask on it needs --yes (64, nothing changed)
  auto no_yes = db.ok({"list-issue", "cancel", b, "--reason", "wrong list"}, 64);
  CHECK(no_yes.err.find("list-issue cancel cannot be undone") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM list_item WHERE state = 'cancelled'") == 0);
  // a cancelled batch never runs
  db.ok({"list-issue", "cancel", b, "--reason", "wrong list", "--yes"});
  CHECK(db.rc({"list-issue", "run", b}).rc == 77);
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
  CHECK(db.count("SELECT count(*) FROM list_item WHERE state = 'cancelled'") == 5);
  CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'list_item' AND to_state = 'cancelled'") == 5);
}

TEST_CASE("list-issue: only a published activity, and a changed definition refuses the run, naming both hashes") {
  TestDb db;
  db.migrate();
  Spec s;
  std::string f = write_file(db.dir(), "act.toml", definition(s));
  db.ok({"activity", "create", "-f", f, "--operator", "seeder"});  // pending_review: it can still change
  write_file(db.dir(), "l.csv", users_csv(0, 5));
  auto r = db.rc({"list-issue", "plan", "act", db.dir() + "/l.csv", "--prize", "p1"});
  CHECK(r.rc == 65);
  CHECK(r.err.find("is pending_review") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM list_batch") == 0);
  db.ok({"activity", "approve", "act", "--as", "product", "--operator", "p"});
  db.ok({"activity", "approve", "act", "--as", "tech", "--operator", "t"});
  db.ok({"activity", "publish", "act", "--full", "--operator", "t"});
  auto b = approved_batch(db, db.dir() + "/l.csv");
  const std::string planned_hash = status(db, b)["definition_hash"];
  // A published definition cannot be replaced through rewardctl; a change made behind its back
  // (a restore, a hand edit) is what the run must catch.
  s.stock = 99;
  const std::string text = definition(s);
  const std::string now_hash = rc::sha256_hex(text);
  REQUIRE(now_hash != planned_hash);
  db.open()->exec("UPDATE activity SET definition = $1, definition_hash = $2", {text, now_hash});
  r = db.rc({"list-issue", "run", b});
  CHECK(r.rc == 65);
  CHECK(r.err.find(planned_hash) != std::string::npos);
  CHECK(r.err.find(now_hash) != std::string::npos);
  CHECK(status(db, b)["state"] == "approved");
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
}

TEST_CASE("list-issue: a batch larger than stock issues the stock and rejects the rest as sold_out") {
  TestDb db;
  auto b = seeded_batch(db, 30, 50, {"--allow-partial"});
  // the dry-run twin: the same counts, nothing written
  auto d = rt::last_json(db.ok({"list-issue", "run", b, "--dry-run", "-o", "json", "--chunk", "7"}, 3));
  CHECK(d["issued"] == 30);
  CHECK(d["rejected"] == 20);
  CHECK(d["reasons"]["sold_out"] == 20);
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
  CHECK(db.count("SELECT count(*) FROM list_item WHERE state = 'pending'") == 50);
  CHECK(db.count("SELECT sum(remain) FROM stock") == 30);
  CHECK(status(db, b)["state"] == "approved");

  // a chunk too big to record in one statement is refused before anything runs
  auto big = db.rc({"list-issue", "run", b, "--chunk", "10001"});
  CHECK(big.rc == 64);
  CHECK(big.err.find("--chunk") != std::string::npos);
  CHECK(status(db, b)["state"] == "approved");

  auto j = rt::last_json(db.ok({"list-issue", "run", b, "-o", "json", "--chunk", "7"}, 3));
  CHECK(j["issued"] == 30);
  CHECK(j["rejected"] == 20);
  CHECK(j["state"] == "done");
  auto c = check_batch(db, b, 30);
  CHECK(c.issued == 30);
  CHECK(c.rejected == 20);
  CHECK(c.stock_left == 0);
  CHECK(c.credited == 30);  // delivered through the ledger
  CHECK(db.count("SELECT count(*) FROM list_item WHERE state = 'rejected' AND reason = 'sold_out'") == 20);
  auto st = status(db, b);
  CHECK(st["state"] == "done");
  CHECK(st["issued"] == 30);
  CHECK(st["rejected"] == 20);
  CHECK(st["pending"] == 0);
  CHECK(st["failed"] == 0);
  CHECK(st["total"] == 50);
  // a rerun of a finished batch changes nothing
  db.ok({"list-issue", "run", b});
  CHECK(db.count("SELECT count(*) FROM grants") == 30);
}

TEST_CASE("list-issue: cancel mid-run stops the worker after its chunk") {
  TestDb db;
  auto b = seeded_batch(db, 1000, 400);
  pid_t pid = spawn_run(db, b, {"--rate", "100", "--chunk", "10"});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finished(db, b) < 30 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto r = db.ok({"list-issue", "cancel", b, "-o", "json", "--reason", "incident over", "--yes"});
  CHECK(wait_exit(pid) == 1);
  auto c = check_batch(db, b, 1000);
  CHECK(c.issued >= 30);
  CHECK(c.issued < 400);
  CHECK(c.pending == 0);
  CHECK(c.issued + c.cancelled == 400);
  CHECK(c.cancelled == rt::last_json(r)["items_cancelled"]);
  CHECK(status(db, b)["state"] == "cancelled");
  CHECK(db.rc({"list-issue", "run", b}).rc == 77);
}

TEST_CASE("list-issue: killed with SIGKILL at random points and rerun, ten rounds") {
  // 10,000 items by default, so that the suite stays within about two minutes on two busy cores;
  // REWARDCTL_TEST_LIST_N=100000 runs the full size.
  const int64_t n = std::getenv("REWARDCTL_TEST_LIST_N") ? std::atoll(std::getenv("REWARDCTL_TEST_LIST_N")) : 10'000;
  TestDb db;
  auto b = seeded_batch(db, n, n);
  std::mt19937 rng(std::random_device{}());
  int64_t last = 0;
  for (int round = 0; round < 10; ++round) {
    pid_t pid = spawn_run(db, b, {"--chunk", "200"});
    // kill at a random point: after a random share of the remaining work has been committed, plus a
    // random delay so that the kill also lands inside chunks and deliveries
    const int64_t target = last + int64_t(std::uniform_int_distribution<int64_t>(1, std::max<int64_t>(1, (n - last) / 12))(rng));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (finished(db, b) < target && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 40)(rng)));
    kill(pid, SIGKILL);
    int rc = wait_exit(pid);
    INFO("round " << round << " rc " << rc);
    auto c = check_batch(db, b, n);
    CHECK(c.issued + c.pending == n);
    CHECK(c.issued >= last);  // nothing committed is lost
    last = c.issued;
  }
  auto j = rt::last_json(db.ok({"list-issue", "run", b, "-o", "json"}));
  CHECK(j["state"] == "done");
  auto c = check_batch(db, b, n);
  CHECK(c.issued == n);
  CHECK(c.pending == 0);
  CHECK(c.credited == n);  // grants left in init by a kill were delivered by the rerun, once each
  CHECK(db.count("SELECT count(*) FROM grants WHERE state <> 'success'") == 0);
  CHECK(db.count("SELECT count(*) FROM ledger_account") == n);
}

TEST_CASE("list-issue: two processes and several workers share one batch with no overlap") {
  TestDb db;
  auto b = seeded_batch(db, 3000, 3000);
  pid_t a = spawn_run(db, b, {"--chunk", "50", "--operator", "w1", "--workers", "2"});
  pid_t c = spawn_run(db, b, {"--chunk", "50", "--operator", "w2"});
  int ra = wait_exit(a), rc2 = wait_exit(c);
  CHECK(ra == 0);
  CHECK(rc2 == 0);
  auto k = check_batch(db, b, 3000);
  CHECK(k.issued == 3000);
  CHECK(k.credited == 3000);
  // each item moved once, by one process
  CHECK(db.count("SELECT count(*) FROM (SELECT entity_id FROM status_log WHERE entity = 'list_item' GROUP BY "
                 "entity_id HAVING count(*) > 1) d") == 0);
  CHECK(status(db, b)["state"] == "done");
  if (is_pg()) {
    // with SKIP LOCKED both processes took chunks of the same batch at the same time
    CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'list_item' AND actor = 'w1'") > 0);
    CHECK(db.count("SELECT count(*) FROM status_log WHERE entity = 'list_item' AND actor = 'w2'") > 0);
  }
}

TEST_CASE("list-issue: a paused activity stops the run with every item still pending, and the run resumes") {
  TestDb db;
  auto b = seeded_batch(db, 100, 20);
  db.ok({"activity", "pause", "act", "--operator", "ops"});
  auto r = db.rc({"list-issue", "run", b, "--chunk", "5"});
  CHECK(r.rc == 75);
  CHECK(r.err.find("answers paused") != std::string::npos);
  CHECK(db.count("SELECT count(*) FROM list_item WHERE state = 'pending'") == 20);
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
  auto st = status(db, b);
  CHECK(st["state"] == "running");
  CHECK(st["last_error"].get<std::string>().find("paused") != std::string::npos);
  db.ok({"activity", "resume", "act", "--operator", "ops"});
  auto j = rt::last_json(db.ok({"list-issue", "run", b, "-o", "json"}));
  CHECK(j["issued"] == 20);
  CHECK(j["state"] == "done");
  CHECK(check_batch(db, b, 100).issued == 20);
}

TEST_CASE("list-issue: run is a job of the runner - pause switch, --limit over every worker, job_run rows") {
  TestDb db;
  auto b = seeded_batch(db, 100, 40);
  // the pause switch: paused, exit 0, nothing issued, no job_run row, the batch still approved
  auto p = rt::last_json(db.ok({"list-issue", "run", b, "-o", "json"}, 0, {{"REWARDCTL_JOBS_PAUSED", "1"}}));
  CHECK(p["state"] == "paused");
  CHECK(db.count("SELECT count(*) FROM grants") == 0);
  CHECK(db.count("SELECT count(*) FROM job_run") == 0);
  CHECK(status(db, b)["state"] == "approved");

  // --limit counts items over every worker and chunk: exactly 13, the rest pending, batch running
  auto j = rt::last_json(db.ok({"list-issue", "run", b, "-o", "json", "--limit", "13", "--chunk", "5", "--workers", "3"}));
  CHECK(j["issued"] == 13);
  CHECK(j["stopped"] == "limit");
  CHECK(j["state"] == "running");
  CHECK(j["pending"] == 27);
  auto c = check_batch(db, b, 100);
  CHECK(c.issued == 13);
  CHECK(c.pending == 27);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE job = 'list-issue' AND state = 'done' AND stopped = 'limit' "
                 "AND exit_code = 0") == 1);

  // the dry run honours --limit too and writes no job_run row
  auto d = rt::last_json(db.ok({"list-issue", "run", b, "-o", "json", "--limit", "4", "--dry-run"}));
  CHECK(d["issued"] == 4);
  CHECK(check_batch(db, b, 100).issued == 13);
  CHECK(db.count("SELECT count(*) FROM job_run") == 1);

  // the same command continues and finishes the batch
  auto k = rt::last_json(db.ok({"list-issue", "run", b, "-o", "json"}));
  CHECK(k["issued"] == 27);
  CHECK(k["state"] == "done");
  CHECK(k["stopped"].is_null());
  CHECK(check_batch(db, b, 100).issued == 40);
  auto h = db.ok({"jobs", "history", "--job", "list-issue", "-o", "json"});
  CHECK(lines(h.out).size() == 2);
  CHECK(db.count("SELECT count(*) FROM job_run WHERE job = 'list-issue' AND state = 'done'") == 2);
}
