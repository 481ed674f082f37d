// serve's endpoints over a real socket: the seeds' own verification, and the answers' shapes.
#include <doctest/doctest.h>

#include <thread>

#include "support/seed.hpp"
#include "support/serve.hpp"

using namespace rt;
using nlohmann::json;

TEST_CASE("serve: seed 000's loop, 200 concurrent curl for one user with distinct bizIds, grants exactly one") {
  TestDb db;
  db.migrate();
  Spec s;
  s.code = "zsff_2025";
  s.limit = 1;
  s.stock = 1000;
  seed(db, s);
  // A request may wait for a worker as long as the loop takes: this test counts limits, not overload
  // (a loaded CI box once queued one of the 200 past the 2 s default and it was answered 503 busy, as
  // documented; the overload answer has its own test, "with every worker busy past queue_timeout_ms").
  ServeProc srv(db, {}, kPatientQueue);
  // the seed's shell loop as written, with the token the server asks for (and a bound on each
  // request, so that a server that hangs fails the test instead of hanging it)
  std::string script = "for i in $(seq 1 200); do\n"
                       "  curl -s --max-time 90 -X POST http://127.0.0.1:" + std::to_string(srv.port) + "/api/receive \\\n"
                       "    -H 'Content-Type: application/json' -H 'Authorization: Bearer " + kServeToken + "' \\\n"
                       "    -d '{ \"activityCode\": \"zsff_2025\", \"userId\": 10001, \"bizId\": \"click-10001-'$i'-test\", \"channel\": \"APP\" }' &\n"
                       "done\nwait\n";
  auto r = run_program({"bash", "-c", script});
  REQUIRE(r.rc == 0);
  int ok = 0, limit = 0, other = 0;
  std::string others;  // the answers that were neither, shown when the check fails
  // the answers come back without newlines between them: split on "}{"
  std::string all = r.out;
  size_t pos = 0;
  while (pos < all.size()) {
    size_t depth = 0, end = pos;
    bool in_str = false;
    for (; end < all.size(); ++end) {
      char c = all[end];
      if (in_str) {
        if (c == '\\') ++end;
        else if (c == '"') in_str = false;
      } else if (c == '"') in_str = true;
      else if (c == '{') ++depth;
      else if (c == '}' && --depth == 0) break;
    }
    auto j = json::parse(all.substr(pos, end + 1 - pos), nullptr, false);
    pos = end + 1;
    if (!j.is_object()) continue;
    int code = j.value("code", -1);
    if (code == 0) ++ok;
    else if (code == 1010) ++limit;
    else {
      ++other;
      if (others.size() < 2000) others += j.dump() + "\n";
    }
  }
  INFO("other answers: " << others);
  CHECK(ok == 1);
  CHECK(limit == 199);
  CHECK(other == 0);
  // the seed's count query's equivalent
  CHECK(db.count("SELECT count(*) FROM grants g JOIN activity a ON a.id = g.activity_id WHERE a.code = 'zsff_2025' "
                 "AND g.user_id = '10001' AND g.state = 'success'") == 1);
  CHECK(db.count("SELECT count(*) FROM grants WHERE user_id = '10001'") == 1);
  CHECK(srv.stop() == 0);
}
