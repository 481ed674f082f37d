// core/states against a real database: a state the database holds but this binary's tables do not
// know (written by hand, or by another version) stops the command with an internal error (exit 70)
// naming the table and the value, before anything is written; the known names read back as before.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "support/seed.hpp"

using namespace rt;
using nlohmann::json;

TEST_CASE("states: an unknown stored state is an internal error naming its table (70), nothing written") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1"});
  CHECK(json::parse(db.ok({"record", "show", "--biz-id", "b1", "-o", "json"}).out)["state"] == "success");
  auto writes = [&] {
    return db.count("SELECT (SELECT count(*) FROM grants) + (SELECT count(*) FROM status_log) + "
                    "(SELECT count(*) FROM ledger_entry)");
  };

  SUBCASE("a grant") {
    db.open()->exec("UPDATE grants SET state = 'bogus' WHERE biz_id = 'b1'");
    const int64_t before = writes();
    auto show = db.ok({"record", "show", "--biz-id", "b1"}, 70);
    CHECK(show.err.find("unknown grant state 'bogus'") != std::string::npos);
    // a replay reads the grant too: refused the same way, and no second effect
    auto again = db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1"}, 70);
    CHECK(again.err.find("unknown grant state 'bogus'") != std::string::npos);
    CHECK(writes() == before);
    db.open()->exec("UPDATE grants SET state = 'success' WHERE biz_id = 'b1'");
  }
  SUBCASE("an activity, with a huge value shown by its start") {
    db.open()->exec("UPDATE activity SET state = '" + std::string(5000, 'z') + "' WHERE code = 'act'");
    const int64_t before = writes();
    auto claim = db.ok({"claim", "act", "--user", "u2", "--biz-id", "b2"}, 70);
    CHECK(claim.err.find("unknown activity state 'zzzz") != std::string::npos);
    CHECK(claim.err.size() < 1000);
    db.ok({"activity", "pause", "act"}, 70);
    CHECK(writes() == before);
    db.open()->exec("UPDATE activity SET state = 'live' WHERE code = 'act'");
  }
  SUBCASE("a state in another case is another state") {
    db.open()->exec("UPDATE grants SET state = 'SUCCESS' WHERE biz_id = 'b1'");
    CHECK(db.ok({"record", "show", "--biz-id", "b1"}, 70).err.find("unknown grant state 'SUCCESS'") !=
          std::string::npos);
    db.open()->exec("UPDATE grants SET state = 'success' WHERE biz_id = 'b1'");
  }
  // restored: everything reads and works as before
  CHECK(json::parse(db.ok({"record", "show", "--biz-id", "b1", "-o", "json"}).out)["state"] == "success");
  db.ok({"claim", "act", "--user", "u3", "--biz-id", "b3"});
}

// (change_request, list_item and fuse_event states are held to their names by CHECK constraints; the
// activity and grant states are not, so these are the reads an unknown value can reach.)
TEST_CASE("states: the read side parses its rows' states too - an unknown one is 70 naming the table") {
  TestDb db;
  db.migrate();
  seed(db, Spec{});
  // a request held by a manual block: fuse show lists it with its grant's state
  const std::string ev = json::parse(db.ok({"fuse", "block", "act", "--prize", "p1", "--reason", "check", "-o", "json"}).out)["event"];
  CHECK(json::parse(db.ok({"claim", "act", "--user", "u1", "--biz-id", "b1", "-o", "json"}, 1).out)["outcome"] == "held");
  auto held_state = [&] { return json::parse(lines(db.ok({"fuse", "show", ev, "-o", "json"}).out).at(0))["state"]; };
  CHECK(held_state() == "pending");
  CHECK(json::parse(db.ok({"activity", "list", "-o", "json"}).out)["state"] == "live");

  SUBCASE("an activity in the list") {
    db.open()->exec("UPDATE activity SET state = 'bogus'");
    CHECK(db.ok({"activity", "list"}, 70).err.find("unknown activity state 'bogus'") != std::string::npos);
    db.open()->exec("UPDATE activity SET state = 'live'");
  }
  SUBCASE("a held request's grant") {
    db.open()->exec("UPDATE grants SET state = 'bogus'");
    CHECK(db.ok({"fuse", "show", ev}, 70).err.find("unknown grant state 'bogus'") != std::string::npos);
    db.open()->exec("UPDATE grants SET state = 'pending'");
  }
  // restored: read as before
  CHECK(held_state() == "pending");
  CHECK(json::parse(db.ok({"activity", "list", "-o", "json"}).out)["kind"] == "direct");
}
