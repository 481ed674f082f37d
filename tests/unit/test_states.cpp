// core/states: every name of every table round-trips, no name is given twice, an unknown name is
// refused (and, read from the database, is an internal error naming the table), and JSON writes names.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "core/engine/reason.hpp"
#include "core/states.hpp"

namespace {

// Every value from the first to `last` is in the table exactly once, in declaration order; its name
// is unique, parses back to it and is what name() and JSON give; unknown names are refused.
template <class E>
void check_table(E last, const std::string& what) {
  const auto& t = rc::names(E{});
  CHECK(std::string(t.what) == what);
  REQUIRE(t.entries.size() == size_t(last) + 1);
  std::set<std::string> seen;
  std::vector<std::string> in_order;
  for (size_t i = 0; i < t.entries.size(); ++i) {
    const auto& [e, n] = t.entries[i];
    CAPTURE(n);
    CHECK(size_t(e) == i);
    CHECK(!std::string(n).empty());
    CHECK(seen.insert(n).second);
    in_order.emplace_back(n);
    CHECK(std::string(rc::name(e)) == n);
    auto back = rc::parse_state<E>(n);
    REQUIRE(back);
    CHECK(*back == e);
    CHECK(rc::state_from_db<E>(n) == e);
    CHECK(nlohmann::json(e) == n);
    CHECK(nlohmann::json{{"state", e}}["state"] == n);
  }
  CHECK(rc::all_names<E>() == in_order);
  for (std::string bad : {std::string(), std::string("no_such_state"), std::string(t.entries[0].second) + " ",
                          std::string(" ") + t.entries[0].second, std::string(t.entries[0].second).substr(1),
                          std::string("\xff\xfe"), std::string(1000, 'x')}) {
    CAPTURE(bad);
    CHECK_FALSE(rc::parse_state<E>(bad));
    try {
      rc::state_from_db<E>(bad);
      FAIL("an unknown name was accepted");
    } catch (const rc::Error& err) {
      CHECK(err.kind() == rc::Errc::internal);
      CHECK(std::string(err.what()).find("unknown " + what + " '") != std::string::npos);
      CHECK(std::string(err.what()).size() < 200);  // a huge value is shown by its start
    }
  }
  // a name of the table in another case is another name
  std::string upper = t.entries[0].second;
  for (auto& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  CHECK_FALSE(rc::parse_state<E>(upper));
}

}  // namespace

TEST_CASE("states: activity names round-trip") { check_table(rc::ActivityState::offline, "activity state"); }
TEST_CASE("states: definition version names round-trip") {
  check_table(rc::VersionState::rejected, "definition version state");
}
TEST_CASE("states: grant names round-trip") { check_table(rc::GrantState::cancelled, "grant state"); }
TEST_CASE("states: qualification names round-trip") {
  check_table(rc::QualificationStatus::expired, "qualification status");
}
TEST_CASE("states: delivery bill names round-trip") { check_table(rc::BillState::abandoned, "delivery bill state"); }
TEST_CASE("states: resend bill names round-trip") { check_table(rc::ResendState::done, "resend bill state"); }
TEST_CASE("states: list batch names round-trip") { check_table(rc::ListBatchState::cancelled, "list batch state"); }
TEST_CASE("states: list item names round-trip") { check_table(rc::ListItemState::cancelled, "list item state"); }
TEST_CASE("states: change request names round-trip") {
  check_table(rc::ChangeRequestState::rejected, "change request state");
}
TEST_CASE("states: fuse event names round-trip") { check_table(rc::FuseEventState::released, "fuse event state"); }
TEST_CASE("states: alert names round-trip") { check_table(rc::AlertState::failed, "alert state"); }
TEST_CASE("states: import run names round-trip") { check_table(rc::ImportRunState::done, "import run state"); }
TEST_CASE("states: outbox names round-trip") { check_table(rc::OutboxState::failed, "outbox state"); }
TEST_CASE("states: activity kind names round-trip") { check_table(rc::activity::Kind::redpack, "activity kind"); }

TEST_CASE("states: the names are the ones the schema and the output use") {
  // The database and every test of the CLI spell these; a renamed entry would change stored data.
  CHECK(rc::all_names<rc::GrantState>() ==
        std::vector<std::string>{"init", "pending", "issuing", "success", "failed", "delayed_resend",
                                 "awaiting_external", "invalid", "expired", "reversed", "cancelled"});
  CHECK(rc::all_names<rc::QualificationStatus>() == std::vector<std::string>{"unused", "used", "revoked", "expired"});
  CHECK(rc::all_names<rc::ResendState>() == std::vector<std::string>{"pending", "manual", "done"});
  CHECK(rc::all_names<rc::ListItemState>() ==
        std::vector<std::string>{"pending", "held", "issued", "rejected", "failed", "cancelled"});
  CHECK(rc::all_names<rc::activity::Kind>() == std::vector<std::string>{"direct", "lottery", "redpack"});
}
TEST_CASE("states: claim reason names round-trip") { check_table(rc::engine::Reason::biz_id_conflict, "claim reason"); }

TEST_CASE("reasons: the words in output are the ones scripts compare (an interface that never changes)") {
  using R = rc::engine::Reason;
  const std::vector<std::pair<R, std::string>> words{
      {R::not_found, "not_found"},         {R::not_live, "not_live"},
      {R::not_started, "not_started"},     {R::ended, "ended"},
      {R::paused, "paused"},               {R::not_in_gray_list, "not_in_gray_list"},
      {R::not_qualified, "not_qualified"}, {R::qualification_used, "qualification_used"},
      {R::blacklisted, "blacklisted"},     {R::limit_reached, "limit_reached"},
      {R::sold_out, "sold_out"},           {R::budget_exhausted, "budget_exhausted"},
      {R::budget_degrade, "budget_degrade"}, {R::held_by_fuse, "held_by_fuse"},
      {R::biz_id_conflict, "biz_id_conflict"}};
  for (auto& [r, w] : words) CHECK(std::string(rc::name(r)) == w);
  // "not now" rather than "never": list-issue stops with items pending on these only
  for (auto& [r, w] : words) {
    CAPTURE(w);
    CHECK(rc::engine::is_transient(r) == (r == R::paused || r == R::not_started || r == R::not_live || r == R::held_by_fuse));
  }
}
