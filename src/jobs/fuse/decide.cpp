// Fuse events: listing, and the operator's decisions (release, confirm) and manual switch (block,
// unblock). Each decision is one conditional update of the event plus a status-log row and an audit
// row, so a decision taken twice (or by two operators at once) takes effect once.
#include <nlohmann/json.hpp>

#include <spdlog/spdlog.h>

#include <exception>
#include <mutex>
#include <thread>

#include "core/audit.hpp"
#include "core/engine/held.hpp"
#include "util/hash.hpp"
#include "jobs/fuse/fuse.hpp"

namespace rc::jobs::fuse {

namespace {

// Held requests decided per transaction. Each chunk holds its users' limit rows until it commits
// (the stock and budget rows only for its last statements), so claims beside it wait for at most
// one chunk. Each request runs under a savepoint: PostgreSQL keeps 64 subtransactions per session
// in shared memory, and a transaction with more makes every other session's snapshot look them up
// in pg_subtrans (SubtransSLRU waits: 200 per chunk ran at 335/s beside claims, bench/release).
constexpr int64_t kReleaseChunk = 50;
// Sessions releasing chunks side by side (PostgreSQL; SQLite has one writer: one). On 2 cores
// with claims beside at half their pace: 1 session ~450/s, 2 ~550/s, 4 ~850/s (bench/release).
constexpr size_t kReleaseWorkers = 4;

const char* kEventSelect =
    "SELECT e.id, e.batch_no, a.code, p.code, coalesce(r.name, 'manual'), coalesce(e.kind, 'manual'), e.state, "
    "coalesce(e.decision, ''), e.observed_count, e.observed_amount, coalesce(e.compare_count, 0), "
    "coalesce(e.compare_amount, 0), e.threshold, coalesce(e.window_from, 0), coalesce(e.window_to, 0), e.reason, "
    "coalesce(e.released_by, ''), coalesce(e.decision_reason, ''), e.created_at, e.released_at "
    "FROM fuse_event e JOIN activity a ON a.id = e.activity_id LEFT JOIN prize p ON p.id = e.prize_id "
    "LEFT JOIN fuse_rule r ON r.id = e.rule_id ";

Event to_event(const store::Row& x) {
  Event e;
  e.id = x.i64(0);
  e.batch_no = x.str(1);
  e.activity = x.str(2);
  e.prize = x.str_or(3, "");
  e.rule = x.str(4);
  e.kind = x.str(5);
  e.state = state_from_db<FuseEventState>(x.str(6));
  e.decision = x.str(7);
  e.observed = {x.i64(8), x.i64(9)};
  e.compare = {x.i64(10), x.i64(11)};
  e.threshold = x.opt_i64(12);
  e.window_from = x.i64(13);
  e.window_to = x.i64(14);
  e.reason = x.str(15);
  e.decided_by = x.str(16);
  e.decision_reason = x.str(17);
  e.created_at = x.i64(18);
  e.decided_at = x.opt_i64(19);
  return e;
}

Event require_event(store::Session& s, const std::string& key) {
  auto e = find_event(s, key);
  if (!e) throw Error(Errc::not_found, "no fuse event '" + key + "' (give its batch number or id; see fuse list)");
  return *e;
}

// What a manual block or unblock is about: an activity, or one of its prizes.
struct Target {
  int64_t activity_id = 0;
  std::optional<int64_t> prize_id;
  std::string what;  // "activity A" or "prize A/P", for messages
};

Target target(store::Session& s, const std::string& activity, const std::optional<std::string>& prize) {
  auto a = s.query("SELECT id FROM activity WHERE code = $1", {activity});
  if (a.empty()) throw Error(Errc::not_found, "no activity '" + activity + "'");
  Target t{a[0].i64(0), std::nullopt, prize ? "prize " + activity + "/" + *prize : "activity " + activity};
  if (prize) {
    auto p = s.query("SELECT id FROM prize WHERE activity_id = $1 AND code = $2", {t.activity_id, *prize});
    if (p.empty()) throw Error(Errc::not_found, "activity '" + activity + "' has no prize '" + *prize + "'");
    t.prize_id = p[0].i64(0);
  }
  return t;
}

// The batch numbers of the open (tripped) events on exactly this target, oldest first; only the
// manual ones when `manual_only`.
std::vector<std::string> open_events(store::Session& s, const Target& t, bool manual_only) {
  auto r = s.query(
      "SELECT batch_no FROM fuse_event WHERE activity_id = $1 AND state = 'tripped' AND "
      "((CAST($2 AS BIGINT) IS NULL AND prize_id IS NULL) OR prize_id = $2) AND ($3 = 0 OR rule_id IS NULL) "
      "ORDER BY id",
      {t.activity_id, store::opt(t.prize_id), int64_t(manual_only)});
  std::vector<std::string> out;
  for (auto& row : r.rows) out.push_back(row.str(0));
  return out;
}

// tripped -> released for one event, then the prize unblocked unless another open event holds it.
// A false alarm may not release a confirmed event (the condition is in the UPDATE, so a confirmation
// that commits while this release waits for the row wins); unblock may.
bool release_one(store::Tx& tx, const Event& e, const std::string& decision, const std::string& reason,
                 const std::string& actor, Millis now) {
  const bool false_alarm = decision == "false_alarm";
  if (tx.exec("UPDATE fuse_event SET state = 'released', released_at = $2, released_by = $3, decision = $4, "
              "decision_reason = $5 WHERE id = $1 AND state = 'tripped'" +
                  std::string(false_alarm ? " AND decision IS NULL" : ""),
              {e.id, now, actor, decision, reason}) != 1)
    return false;
  log_moved(tx, e.id, FuseEventState::tripped, FuseEventState::released, actor, decision + ": " + reason, now);
  tx.exec(
      "UPDATE prize SET blocked = 0 WHERE id = (SELECT prize_id FROM fuse_event WHERE id = $1) AND NOT EXISTS "
      "(SELECT 1 FROM fuse_event o WHERE o.prize_id = prize.id AND o.state = 'tripped')",
      {e.id});
  return true;
}

std::string detail(const Event& e, const std::string& decision, const std::string& reason) {
  return nlohmann::json{{"batch_no", e.batch_no}, {"activity", e.activity}, {"prize", e.prize},
                        {"rule", e.rule},         {"decision", decision},   {"reason", reason}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string target_name(const Event& e) {
  return e.prize.empty() ? "activity " + e.activity : "prize " + e.activity + "/" + e.prize;
}

// Sends every request event_id still holds through the claim flow again, oldest first, in chunks
// by id, each chunk one transaction (Engine::release_held_many): each is moved once, whoever else
// is releasing at the same time. On PostgreSQL kReleaseWorkers sessions (the store's companions)
// take chunks side by side; their chunks cannot wait on each other crosswise (each locks its users
// in one order, the hot rows last in one order: Engine::release_held_many).
void finish_held(engine::Engine& eng, int64_t event_id, HeldCounts& h) {
  std::mutex mu;  // guards after, seen, h and failure
  int64_t after = 0, seen = 0;
  bool done = false;
  std::exception_ptr failure;
  auto work = [&](engine::Engine& e) {
    for (;;) {
      std::vector<int64_t> ids;
      {
        std::lock_guard<std::mutex> l(mu);
        if (done || failure) return;
        ids = engine::held_grants(e.store().autocommit(), event_id, after, kReleaseChunk);
        if (ids.empty()) {
          done = true;
          return;
        }
        after = ids.back();
      }
      try {
        auto results = e.release_held_many(ids, false);
        std::lock_guard<std::mutex> l(mu);
        for (const auto& r : results) {
          if (r.result == "granted") ++h.granted;
          else if (r.result == "rejected") ++h.rejected, ++h.reasons[name(r.reason)];
          else if (r.result == "still_held") ++h.still_held;
          else ++h.decided;
        }
        const int64_t before = seen;
        seen += int64_t(ids.size());
        if (seen / 1000 != before / 1000) spdlog::info("fuse release: {} held request(s) done", seen);
      } catch (...) {
        std::lock_guard<std::mutex> l(mu);
        if (!failure) failure = std::current_exception();
        return;
      }
    }
  };
  std::vector<std::unique_ptr<engine::Engine>> helpers;
  for (size_t w = 0; w + 1 < kReleaseWorkers; ++w)
    if (store::Store* c = eng.store().companion(w))
      helpers.push_back(std::make_unique<engine::Engine>(*c, eng.clock(), eng.options()));
  std::vector<std::thread> threads;
  for (auto& e : helpers) threads.emplace_back([&work, &e] { work(*e); });
  work(eng);
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

int64_t count_held(store::Session& s, int64_t event_id) {
  return s.query("SELECT count(*) FROM grants WHERE fuse_event_id = $1 AND state = 'pending'", {event_id})[0].i64(0);
}

std::string held_summary(const HeldCounts& h) {
  if (h.granted + h.rejected + h.still_held + h.decided == 0) return "";
  std::string s = "; held requests: " + std::to_string(h.granted) + " granted, " + std::to_string(h.rejected) + " rejected";
  for (auto& [k, v] : h.reasons) s += (k == h.reasons.begin()->first ? " (" : ", ") + k + " " + std::to_string(v);
  if (!h.reasons.empty()) s += ")";
  if (h.still_held) s += ", " + std::to_string(h.still_held) + " still held by another event";
  if (h.decided) s += ", " + std::to_string(h.decided) + " decided by a concurrent run";
  return s;
}

}  // namespace

std::vector<HeldRequest> held_requests(store::Session& s, int64_t event_id) {
  auto r = s.query(
      "SELECT record_code, user_id, biz_id, state, coalesce(reason, ''), created_at, updated_at FROM grants "
      "WHERE fuse_event_id = $1 ORDER BY id",
      {event_id});
  std::vector<HeldRequest> out;
  for (auto& x : r.rows)
    out.push_back({x.str(0), x.str(1), x.str(2), state_from_db<GrantState>(x.str(3)), x.str(4), x.i64(5), x.i64(6)});
  return out;
}

std::vector<Event> list_events(store::Session& s, const std::optional<std::string>& state) {
  auto r = state ? s.query(std::string(kEventSelect) + "WHERE e.state = $1 ORDER BY e.id DESC", {*state})
                 : s.query(std::string(kEventSelect) + "ORDER BY e.id DESC");
  std::vector<Event> out;
  for (auto& x : r.rows) out.push_back(to_event(x));
  return out;
}

std::optional<Event> find_event(store::Session& s, const std::string& key) {
  auto r = s.query(std::string(kEventSelect) + "WHERE e.batch_no = $1", {key});
  if (r.empty() && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos && key.size() < 19)
    r = s.query(std::string(kEventSelect) + "WHERE e.id = $1", {int64_t(std::stoll(key))});
  if (r.empty()) return std::nullopt;
  return to_event(r[0]);
}

Decision release(engine::Engine& eng, const std::string& key, const std::string& reason, const std::string& actor,
                 Millis now, bool dry_run) {
  store::Store& st = eng.store();
  Decision d;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    d = Decision{};
    d.event = require_event(tx, key);
    using F = FuseEventState;
    if (d.event.state == F::tripped && d.event.decision == "confirmed")
      throw Error(Errc::conflict, "fuse event " + d.event.batch_no +
                                      " was confirmed as a real incident: it cannot be released as a false alarm "
                                      "(fuse unblock " + d.event.activity +
                                      (d.event.prize.empty() ? "" : " --prize " + d.event.prize) + " lifts the block)");
    if (dry_run) {
      d.held.held = count_held(tx, d.event.id);
      d.message = (d.event.state == F::tripped ? "would release " + d.event.batch_no + " (false alarm) and unblock " +
                                                    target_name(d.event)
                                              : "fuse event " + d.event.batch_no + " is already released") +
                  "; " + std::to_string(d.held.held) + " held request(s) would go through the claim flow again";
      return tx.rollback_only();
    }
    if (d.event.state != F::tripped) return tx.rollback_only();
    d.changed = release_one(tx, d.event, "false_alarm", reason, actor, now);
    if (!d.changed) {
      // decided concurrently: released (fine, its held requests are finished below) or confirmed
      d.event = require_event(tx, key);
      if (d.event.state == F::tripped) throw Error(Errc::conflict, "fuse event " + d.event.batch_no +
                                                                      " was confirmed concurrently: it stays blocked");
      return tx.rollback_only();
    }
    audit(tx, actor, "fuse.release", "fuse_event", d.event.batch_no, detail(d.event, "false_alarm", reason), now);
  });
  if (dry_run) return d;
  // The event is released now (by us or before): finish every request it still holds.
  finish_held(eng, d.event.id, d.held);
  d.event = *find_event(st.autocommit(), d.event.batch_no);
  const bool finished = d.held.granted + d.held.rejected + d.held.still_held > 0;
  d.message = (d.changed ? "released " + d.event.batch_no + " as a false alarm: " + target_name(d.event) + " unblocked"
                         : "fuse event " + d.event.batch_no + " is already released" +
                               std::string(finished ? "" : ": nothing to do")) +
              held_summary(d.held);
  d.changed = d.changed || finished;
  return d;
}

Decision confirm(store::Store& st, const std::string& key, const std::string& reason, const std::string& actor,
                 Millis now, bool dry_run) {
  Decision d;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    d = Decision{};
    d.event = require_event(tx, key);
    if (d.event.state != FuseEventState::tripped)
      throw Error(Errc::conflict, "fuse event " + d.event.batch_no + " is released (" + d.event.decision +
                                      "): there is nothing left to confirm");
    const bool decide = d.event.decision != "confirmed";
    if (dry_run) {
      d.held.held = count_held(tx, d.event.id);
      d.message = std::string(decide ? "would confirm " + d.event.batch_no + ": it stays blocked"
                                     : "fuse event " + d.event.batch_no + " is already confirmed") +
                  "; " + std::to_string(d.held.held) + " held request(s) would be cancelled";
      return tx.rollback_only();
    }
    // A conditional update decides between two confirmations; the state stays tripped (blocking).
    bool decided = decide && tx.exec("UPDATE fuse_event SET decision = 'confirmed', decision_reason = $2, released_by = $3 "
                                     "WHERE id = $1 AND state = 'tripped' AND decision IS NULL",
                                     {d.event.id, reason, actor}) == 1;
    // Not decided by us: make sure it is still tripped before cancelling what it holds (a release
    // that committed meanwhile owns those requests). FOR UPDATE (PostgreSQL) keeps it so until commit.
    if (!decided &&
        tx.query("SELECT 1 FROM fuse_event WHERE id = $1 AND state = 'tripped'" +
                     tx.lock_rows(store::Lock::update),
                 {d.event.id})
            .empty())
      throw Error(Errc::conflict, "fuse event " + d.event.batch_no + " was released concurrently: nothing to confirm");
    d.held.cancelled = engine::cancel_held(tx, d.event.id, reason, actor, now);
    if (!decided && d.held.cancelled == 0) {
      d.message = "fuse event " + d.event.batch_no + " is already confirmed: nothing to do";
      return tx.rollback_only();
    }
    if (decided) audit(tx, actor, "fuse.confirm", "fuse_event", d.event.batch_no, detail(d.event, "confirmed", reason), now);
    d.changed = true;
    d.message = (decided ? "confirmed " + d.event.batch_no + ": stays blocked"
                         : "fuse event " + d.event.batch_no + " is already confirmed") +
                "; " + std::to_string(d.held.cancelled) + " held request(s) cancelled";
  });
  if (d.changed) d.event = *find_event(st.autocommit(), d.event.batch_no);
  return d;
}

Decision block(store::Store& st, const std::string& activity, const std::optional<std::string>& prize,
               const std::string& reason, const std::string& actor, Millis now, bool dry_run) {
  Decision d;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    d = Decision{};
    auto t = target(tx, activity, prize);
    const std::string& what = t.what;
    auto open = open_events(tx, t, true);
    if (!open.empty()) {
      d.event = require_event(tx, open[0]);
      d.message = what + " is already blocked by " + d.event.batch_no + ": nothing to do";
      return tx.rollback_only();
    }
    if (dry_run) {
      d.message = "would block " + what;
      return tx.rollback_only();
    }
    const std::string batch = new_id("F", now);
    int64_t id = tx.query(
                       "INSERT INTO fuse_event (batch_no, rule_id, activity_id, prize_id, state, observed_count, "
                       "observed_amount, reason, created_at, kind) VALUES ($1, NULL, $2, $3, 'tripped', 0, 0, $4, $5, "
                       "'manual') RETURNING id",
                       {batch, t.activity_id, store::opt(t.prize_id), "blocked by " + actor + ": " + reason, now})[0]
                     .i64(0);
    log_created(tx, id, FuseEventState::tripped, actor, "manual block: " + reason, now);
    if (t.prize_id) tx.exec("UPDATE prize SET blocked = 1 WHERE id = $1", {*t.prize_id});
    d.event = require_event(tx, batch);
    audit(tx, actor, "fuse.block", "fuse_event", batch, detail(d.event, "block", reason), now);
    d.changed = true;
    d.message = "blocked " + what + " (" + batch + ")";
  });
  return d;
}

Decision unblock(engine::Engine& eng, const std::string& activity, const std::optional<std::string>& prize,
                 const std::string& reason, const std::string& actor, Millis now, bool dry_run) {
  store::Store& st = eng.store();
  Decision d;
  std::vector<int64_t> released;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    d = Decision{};
    released.clear();
    auto t = target(tx, activity, prize);
    const std::string& what = t.what;
    auto open = open_events(tx, t, false);
    if (open.empty()) {
      d.message = what + " is not blocked: nothing to do";
      return tx.rollback_only();
    }
    if (dry_run) {
      d.message = "would unblock " + what + " (" + std::to_string(open.size()) + " open event(s))";
      return tx.rollback_only();
    }
    int n = 0;
    for (auto& batch : open) {
      d.event = require_event(tx, batch);
      if (!release_one(tx, d.event, "unblocked", reason, actor, now)) continue;  // released concurrently
      ++n;
      released.push_back(d.event.id);
      audit(tx, actor, "fuse.unblock", "fuse_event", d.event.batch_no, detail(d.event, "unblocked", reason), now);
    }
    d.changed = n > 0;
    d.message = "unblocked " + what + " (" + std::to_string(n) + " event(s) released)";
  });
  for (int64_t id : released) finish_held(eng, id, d.held);
  // (the event as it is now, released, not as the transaction found it)
  if (!released.empty())
    if (auto e = find_event(st.autocommit(), d.event.batch_no)) d.event = *e;
  d.message += held_summary(d.held);
  return d;
}

}  // namespace rc::jobs::fuse
