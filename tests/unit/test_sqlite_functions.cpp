// core/store/sqlite: the SQL functions every SQLite connection has (rc_identifier_clean).
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "core/store/store.hpp"

using namespace rc;

TEST_CASE("sqlite: rc_identifier_clean(text) is 1 or 0 by the identifier text rules, NULL for NULL") {
  char dir[] = "/tmp/rcfn.XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string path = std::string(dir) + "/t.db";
  {
    store::StoreOptions o;
    o.create_if_missing = true;
    auto s = store::open_sqlite(path, o);
    auto clean = [&](const std::string& v) { return s->query("SELECT rc_identifier_clean($1)", {v})[0].i64(0); };
    CHECK(clean("u1") == 1);
    CHECK(clean("caf\xC3\xA9") == 1);  // café, NFC
    CHECK(clean("用户一") == 1);
    CHECK(clean("cafe\xCC\x81") == 0);      // café, NFD
    CHECK(clean("evil\xE2\x80\x8B") == 0);  // U+200B
    CHECK(clean("\xE2\x80\x8B") == 0);
    CHECK(clean("a\xE2\x80\xAE" "b") == 0);    // U+202E
    CHECK(clean("u\xF3\xA0\x81\x81") == 0);  // a tag character
    CHECK(clean("a\x01") == 0);
    CHECK(s->query("SELECT rc_identifier_clean(NULL)")[0].is_null(0));
    CHECK(s->query("SELECT rc_identifier_clean(CAST(x'ff' AS TEXT))")[0].i64(0) == 0);  // invalid UTF-8
    // over a table, as a check of stored rows would use it
    s->exec("CREATE TABLE t (u TEXT)");
    for (const char* u : {"u1", "evil\xE2\x80\x8B", "cafe\xCC\x81", "caf\xC3\xA9"}) s->exec("INSERT INTO t VALUES ($1)", {std::string(u)});
    CHECK(s->query("SELECT count(*) FROM t WHERE rc_identifier_clean(u) = 0")[0].i64(0) == 2);
  }
  {
    // a second connection (a new store on the same file) has it too
    auto s = store::open_sqlite(path, store::StoreOptions{});
    CHECK(s->query("SELECT count(*) FROM t WHERE rc_identifier_clean(u) = 1")[0].i64(0) == 2);
  }
  unlink(path.c_str());
  unlink((path + "-wal").c_str());
  unlink((path + "-shm").c_str());
  rmdir(dir);
}
