// activity apply (idempotent seeding, issue 13 point 4) and consent for irreversible actions
// without a terminal (point 5), through the binary on both backends.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <thread>

#include "support/harness.hpp"

using nlohmann::json;

namespace {

// A draft direct activity whose window is open for years (claims are not what is tested here).
std::string definition(const std::string& name, const std::string& code = "seeded") {
  auto r = rt::run({"activity", "new", "--kind", "redpack", "--code", code, "--start", "2025-01-01T00:00:00+08:00",
                    "--end", "2099-01-01T00:00:00+08:00"});
  REQUIRE(r.rc == 0);
  std::string t = r.out;
  auto at = t.find("name = \"");
  REQUIRE(at != std::string::npos);
  auto end = t.find('"', at + 8);
  return t.substr(0, at + 8) + name + t.substr(end);
}

}  // namespace

TEST_CASE("apply: created, then unchanged, then updated while not live, refused once published") {
  rt::TestDb db;
  db.migrate();
  rt::write_file(db.dir(), "a.toml", definition("Seeded packets"));

  SUBCASE("dry run writes nothing") {
    auto d = rt::last_json(db.ok({"activity", "apply", "-f", "a.toml", "--dry-run", "-o", "json"}));
    CHECK(d["action"] == "created");
    CHECK(d["dry_run"] == true);
    CHECK(db.count("SELECT COUNT(*) FROM activity") == 0);
  }

  auto c = rt::last_json(db.ok({"activity", "apply", "-f", "a.toml", "-o", "json"}));
  CHECK(c["action"] == "created");
  CHECK(c["state"] == "pending_review");
  CHECK(c["previous_hash"].is_null());
  int64_t audits = db.count("SELECT COUNT(*) FROM audit");
  int64_t logs = db.count("SELECT COUNT(*) FROM status_log");

  auto u = rt::last_json(db.ok({"activity", "apply", "-f", "a.toml", "-o", "json"}));
  CHECK(u["action"] == "unchanged");
  CHECK(u["definition_hash"] == c["definition_hash"]);
  CHECK(db.count("SELECT COUNT(*) FROM audit") == audits);
  CHECK(db.count("SELECT COUNT(*) FROM status_log") == logs);
  CHECK(db.count("SELECT version FROM activity WHERE code = 'seeded'") == 1);
  auto table = db.ok({"activity", "apply", "-f", "a.toml"});
  CHECK(table.out.find("unchanged") != std::string::npos);

  rt::write_file(db.dir(), "b.toml", definition("Seeded packets, v2"));
  auto up = rt::last_json(db.ok({"activity", "apply", "-f", "b.toml", "-o", "json"}));
  CHECK(up["action"] == "updated");
  CHECK(up["previous_hash"] == c["definition_hash"]);
  CHECK(db.count("SELECT version FROM activity WHERE code = 'seeded'") == 2);

  db.ok({"activity", "approve", "seeded", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "seeded", "--as", "tech", "--operator", "carol"});
  db.ok({"activity", "publish", "seeded", "--full", "--operator", "carol"});
  // the published definition again: unchanged; a different one: refused, naming both hashes
  CHECK(rt::last_json(db.ok({"activity", "apply", "-f", "b.toml", "-o", "json"}))["action"] == "unchanged");
  auto refused = db.ok({"activity", "apply", "-f", "a.toml"}, 65);
  CHECK(refused.err.find(up["definition_hash"].get<std::string>()) != std::string::npos);
  CHECK(refused.err.find(c["definition_hash"].get<std::string>()) != std::string::npos);
  CHECK(refused.err.find("is live") != std::string::npos);
  CHECK(db.count("SELECT version FROM activity WHERE code = 'seeded'") == 2);
}

TEST_CASE("apply: two CI jobs applying the same new file at once make one activity, both exit 0") {
  rt::TestDb db;
  db.migrate();
  for (int round = 0; round < 3; ++round) {
    std::string file = "r" + std::to_string(round) + ".toml";
    rt::write_file(db.dir(), file, definition("Raced", "raced_" + std::to_string(round)));
    std::vector<rt::Run> runs(4);
    std::vector<std::thread> ts;
    for (auto& r : runs) ts.emplace_back([&] { r = db.rc({"activity", "apply", "-f", file, "-o", "json"}); });
    for (auto& t : ts) t.join();
    int created = 0;
    for (auto& r : runs) {
      INFO(r.out << r.err);
      CHECK(r.rc == 0);
      if (r.rc == 0 && rt::last_json(r)["action"] == "created") ++created;
    }
    CHECK(created == 1);
    CHECK(db.count("SELECT COUNT(*) FROM activity") == round + 1);
  }
}

TEST_CASE("consent: offline, reverse and revoke without a terminal need --yes (exit 64, nothing changed)") {
  rt::TestDb db;
  db.migrate();
  rt::write_file(db.dir(), "a.toml", definition("Consent"));
  db.ok({"activity", "create", "-f", "a.toml", "--operator", "alice"});
  db.ok({"activity", "approve", "seeded", "--as", "product", "--operator", "bob"});
  db.ok({"activity", "approve", "seeded", "--as", "tech", "--operator", "carol"});
  db.ok({"activity", "publish", "seeded", "--full"});
  db.ok({"claim", "seeded", "--user", "u1", "--biz-id", "b1"});

  auto off = db.ok({"activity", "offline", "seeded", "--reason", "done"}, 64);
  CHECK(off.err.find("--yes") != std::string::npos);
  auto rev = db.ok({"reverse", "--biz-id", "b1", "--reason", "refund"}, 64);
  CHECK(rev.err.find("--yes") != std::string::npos);
  rt::write_file(db.dir(), "u.csv", "user_id\nu1\n");
  db.ok({"qualification", "revoke", "seeded", "u.csv"}, 64);
  CHECK(db.count("SELECT COUNT(*) FROM activity WHERE state = 'live'") == 1);
  CHECK(db.count("SELECT COUNT(*) FROM grants WHERE state = 'success'") == 1);

  // --dry-run needs no consent; --yes goes ahead
  db.ok({"activity", "offline", "seeded", "--reason", "done", "--dry-run"});
  db.ok({"reverse", "--biz-id", "b1", "--reason", "refund", "--dry-run"});
  db.ok({"reverse", "--biz-id", "b1", "--reason", "refund", "--yes"});
  CHECK(db.count("SELECT COUNT(*) FROM grants WHERE state = 'reversed'") == 1);
  db.ok({"activity", "offline", "seeded", "--reason", "done", "-y"});
  CHECK(db.count("SELECT COUNT(*) FROM activity WHERE state = 'offline'") == 1);
}
