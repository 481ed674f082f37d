// Error kinds (core/error.hpp): the one table from what went wrong to the exit code a user sees.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

#include "base/error.hpp"

using namespace rc;

TEST_CASE("error kinds: one row per kind, in order, each to a code that help exit-codes documents") {
  std::set<int> documented;
  for (auto& e : exit_table()) documented.insert(exit_int(e.code));
  const auto& t = errc_table();
  REQUIRE(t.size() == size_t(Errc::internal) + 1);
  std::set<std::string> names;
  for (size_t i = 0; i < t.size(); ++i) {
    CAPTURE(t[i].name);
    CHECK(size_t(t[i].kind) == i);
    CHECK(documented.count(exit_int(t[i].exit)) == 1);
    CHECK(exit_code(t[i].kind) == t[i].exit);
    CHECK(std::string(errc_name(t[i].kind)) == t[i].name);
    CHECK(errc_from_name(t[i].name) == t[i].kind);  // the drill worker protocol sends the name
    CHECK(names.insert(t[i].name).second);
  }
  CHECK_FALSE(errc_from_name(""));
  CHECK_FALSE(errc_from_name("data"));  // an exit code's name is not a kind
}

TEST_CASE("error kinds: codes are shared only where intended, and results are never thrown") {
  std::map<Exit, std::set<std::string>> by_code;
  for (auto& r : errc_table()) by_code[r.exit].insert(r.name);
  for (auto& [code, kinds] : by_code) {
    CAPTURE(exit_int(code));
    // the one many-to-one: malformed input, and input that contradicts what is stored (it exists
    // already, is in the wrong state, changed since it was planned): both refuse with nothing written
    if (code == Exit::data) CHECK(kinds == std::set<std::string>{"bad_input", "conflict"});
    else CHECK(kinds.size() == 1);
  }
  // ok and partial are outcomes a command returns; every other documented code has a kind
  CHECK(by_code.count(Exit::ok) == 0);
  CHECK(by_code.count(Exit::partial) == 0);
  for (auto& e : exit_table())
    if (e.code != Exit::ok && e.code != Exit::partial) CHECK(by_code.count(e.code) == 1);
}

TEST_CASE("error kinds: the exit codes users and scripts see") {
  const std::map<Errc, int> want = {
      {Errc::refused, 1},           {Errc::usage, 64},    {Errc::bad_input, 65},     {Errc::conflict, 65},
      {Errc::input_unreadable, 66}, {Errc::not_found, 67}, {Errc::unavailable, 69},  {Errc::internal, 70},
      {Errc::output_failed, 73},    {Errc::busy, 75},     {Errc::not_permitted, 77}, {Errc::config, 78},
      {Errc::interrupted, 130}};
  CHECK(want.size() == errc_table().size());
  for (auto& [kind, code] : want) {
    CAPTURE(errc_name(kind));
    CHECK(exit_int(exit_code(kind)) == code);
  }
  try {
    throw Error(Errc::not_found, "no activity 'x'");
  } catch (const Error& e) {
    CHECK(e.kind() == Errc::not_found);
    CHECK(std::string(e.what()) == "no activity 'x'");
  }
}
