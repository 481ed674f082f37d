#include "jobs/resend/resend.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <map>

#include "core/audit.hpp"
#include "core/delivery/channel.hpp"
#include "core/engine/release.hpp"

namespace rc::jobs {
namespace {

struct Cursor {
  int64_t at = INT64_MIN, id = 0;
};

struct Claimed {
  int64_t grant_id;
  std::string channel;
};

// A pending resend bill that fell due, and its grant.
struct DueBill {
  int64_t id = 0, grant_id = 0;
  Millis expires_at = 0;
  int64_t attempts = 0;
  Millis next_attempt_at = 0;
  GrantState grant_state = GrantState::init;
  std::string channel;  // "" when the grant names none
};
DueBill to_due_bill(const store::Row& r) {
  return {r.i64(0), r.i64(1), r.i64(2), r.i64(3), r.i64(4), state_from_db<GrantState>(r.str(5)), r.str_or(6, "")};
}

// A grant left in init.
struct StrandedGrant {
  int64_t id = 0;
  std::string channel;
  Millis updated_at = 0;
};
StrandedGrant to_stranded(const store::Row& r) { return {r.i64(0), r.str_or(1, ""), r.i64(2)}; }

// Due bills after the cursor, claimed for this run. Returns the rows seen.
int64_t claim_bills(JobRun& run, store::Tx& tx, Counts& c, Cursor& cur, int64_t n, const ResendOptions& o,
                    std::vector<Claimed>& out, int64_t& items) {
  const Millis now = run.now();
  auto r = tx.query(std::string("SELECT rb.id, rb.grant_id, rb.expires_at, rb.attempts, rb.next_attempt_at, g.state, "
                                "g.channel FROM resend_bill rb JOIN grants g ON g.id = rb.grant_id "
                                "WHERE rb.state = 'pending' AND rb.next_attempt_at <= $1 AND (rb.next_attempt_at > $2 "
                                "OR (rb.next_attempt_at = $2 AND rb.id > $3)) ORDER BY rb.next_attempt_at, rb.id LIMIT $4") +
                        tx.lock_rows(store::Lock::update_skip_locked, "rb"),
                    {now, cur.at, cur.id, n});
  for (auto& row : r.rows) {
    const DueBill b = to_due_bill(row);
    const int64_t id = b.id, gid = b.grant_id;
    cur = {b.next_attempt_at, id};
    using G = GrantState;
    const G gstate = b.grant_state;
    if (gstate != G::issuing && gstate != G::delayed_resend && gstate != G::init) {
      // the grant ended another way (delivered by a replayed claim, completed, reversed): nothing to resend
      if (transition(tx, id, ResendState::pending, ResendState::done, run.actor(), std::string("grant is ") + name(gstate),
                     now))
        ++c["closed"];
      continue;
    }
    // A delivery still in issuing when its resend fell due crashed or hung past its timeout: take it
    // over (the engine reuses the bill number).
    if (gstate == G::issuing && !transition(tx, gid, G::issuing, G::delayed_resend, run.actor(),
                                            "no outcome recorded before the resend fell due", now))
      continue;
    ++items;
    if (b.expires_at <= now) {
      transition(tx, id, ResendState::pending, ResendState::manual, run.actor(),
                 "expired after " + std::to_string(b.attempts) + " attempts: resend retry or resend abandon", now);
      ++c["manual"];
      continue;
    }
    if (run.dry_run()) {
      ++c["due"];
      continue;
    }
    // claimed: not due again until this run has certainly finished with it
    tx.exec("UPDATE resend_bill SET next_attempt_at = $2, updated_at = $3 WHERE id = $1", {id, now + o.claim_hold_ms, now});
    out.push_back({gid, b.channel});
  }
  return int64_t(r.size());
}

// Grants left in init past the grace period. Returns the rows seen.
int64_t claim_stranded(JobRun& run, store::Tx& tx, Counts& c, Cursor& cur, int64_t n, const ResendOptions& o,
                       std::vector<Claimed>& out, int64_t& items) {
  auto r = tx.query(std::string("SELECT id, channel, updated_at FROM grants WHERE state = 'init' AND updated_at <= $1 "
                                "AND (updated_at > $2 OR (updated_at = $2 AND id > $3)) ORDER BY updated_at, id LIMIT $4") +
                        tx.lock_rows(store::Lock::update_skip_locked),
                    {run.now() - o.init_grace_ms, cur.at, cur.id, n});
  for (auto& row : r.rows) {
    const StrandedGrant g = to_stranded(row);
    cur = {g.updated_at, g.id};
    ++items;
    if (run.dry_run()) ++c["stranded"];
    else out.push_back({g.id, g.channel});
  }
  return int64_t(r.size());
}

class Deliverer {
 public:
  Deliverer(JobRun& run, engine::Engine& eng, const ResendOptions& o) : run_(run), eng_(eng), o_(o) {}

  // Delivers every claimed grant, even after a signal (the chunk finishes; only the rate wait stops).
  void all(const std::vector<Claimed>& claimed) {
    for (auto& c : claimed) {
      pace(c.channel);
      try {
        auto d = eng_.deliver(c.grant_id);
        using G = GrantState;
        run_.add(!d.delivered_now                        ? "skipped"
                 : d.state == G::success                ? "delivered"
                 : d.state == G::failed                 ? "failed"
                 : d.state == G::delayed_resend         ? "rescheduled"
                 : d.state == G::awaiting_external      ? "handed_over"
                                                        : "skipped");
      } catch (const Error& e) {
        if (e.kind() != Errc::config && e.kind() != Errc::busy && e.kind() != Errc::bad_input) throw;
        spdlog::warn("resend: grant {} not delivered: {}", c.grant_id, e.what());
        run_.add("errors");
      }
    }
  }

 private:
  void pace(const std::string& channel) {
    if (o_.rate_per_second <= 0) return;
    auto& l = limiters_.try_emplace(channel, int(std::max(1.0, o_.rate_per_second))).first->second;
    auto now = delivery::RateLimiter::clock::now();
    auto at = l.acquire(now);
    if (at > now) run_.sleep_ms(std::chrono::duration_cast<std::chrono::milliseconds>(at - now).count() + 1);
  }

  JobRun& run_;
  engine::Engine& eng_;
  const ResendOptions& o_;
  std::map<std::string, delivery::RateLimiter> limiters_;
};

ResendBill to_bill(const store::Row& r) {
  ResendBill b;
  b.id = r.i64(0);
  b.bill_no = r.str(1);
  b.record_code = r.str(2);
  b.activity = r.str(3);
  b.user = r.str(4);
  b.state = state_from_db<ResendState>(r.str(5));
  b.grant_state = state_from_db<GrantState>(r.str(6));
  b.channel = r.str_or(7, "");
  b.attempts = r.i64(8);
  b.next_attempt_at = r.i64(9);
  b.expires_at = r.i64(10);
  b.updated_at = r.i64(11);
  b.last_error = r.opt_str(12);
  b.grant_id = r.i64(13);
  return b;
}

const char* kBillSelect =
    "SELECT rb.id, rb.bill_no, g.record_code, a.code, rb.user_id, rb.state, g.state, g.channel, rb.attempts, "
    "rb.next_attempt_at, rb.expires_at, rb.updated_at, rb.last_error, rb.grant_id "
    "FROM resend_bill rb JOIN grants g ON g.id = rb.grant_id JOIN activity a ON a.id = g.activity_id ";

ResendBill find_bill(store::Session& s, const std::string& bill_no) {
  auto r = s.query(std::string(kBillSelect) + "WHERE rb.bill_no = $1", {bill_no});
  if (r.empty()) throw Error(Errc::not_found, "no resend bill '" + bill_no + "' (see rewardctl resend list)");
  return to_bill(r[0]);
}

}  // namespace

void resend(JobRun& run, engine::Engine& eng, const ResendOptions& o) {
  for (const char* k : run.dry_run() ? std::vector<const char*>{"due", "manual", "closed", "stranded"}
                                     : std::vector<const char*>{"delivered", "rescheduled", "failed", "manual", "closed"})
    run.add(k, 0);
  Deliverer deliver(run, eng, o);
  using Claim = int64_t (*)(JobRun&, store::Tx&, Counts&, Cursor&, int64_t, const ResendOptions&,
                            std::vector<Claimed>&, int64_t&);
  for (Claim claim : {Claim(claim_bills), Claim(claim_stranded)}) {
    Cursor cur, next;
    while (run.more()) {
      const int64_t want = run.allowance(o.chunk);
      int64_t seen = 0;
      std::vector<Claimed> claimed;
      run.chunk([&](store::Tx& tx, Counts& c) {
        claimed.clear();
        next = cur;
        int64_t items = 0;
        seen = claim(run, tx, c, next, want, o, claimed, items);
        return items;
      });
      cur = next;
      deliver.all(claimed);
      if (seen < want) break;
    }
  }
}

std::vector<ResendBill> list_resend(store::Store& s, const std::string& state, const std::string& activity,
                                    int64_t limit) {
  if (!state.empty() && !parse_state<ResendState>(state))
    throw Error(Errc::usage, "--state must be pending, manual or done, not '" + state + "'");
  auto r = s.query(std::string(kBillSelect) +
                       "WHERE ($1 = '' OR rb.state = $1) AND ($2 = '' OR a.code = $2) "
                       "ORDER BY rb.next_attempt_at, rb.id LIMIT $3",
                   {state, activity, limit});
  std::vector<ResendBill> out;
  for (auto& row : r.rows) out.push_back(to_bill(row));
  return out;
}

ResendChange retry_resend(store::Store& s, const std::string& bill_no, const std::string& actor, Millis now,
                          int64_t expiry_ms, bool dry_run) {
  ResendChange out;
  s.transact(store::TxMode::write, [&](store::Tx& tx) {
    out = ResendChange{};
    auto b = find_bill(tx, bill_no);
    out.bill = b;
    if (b.state == ResendState::done) {
      out.message =
          "bill " + bill_no + " is done (grant " + b.record_code + " is " + name(b.grant_state) + "): nothing to retry";
      tx.rollback_only();
      return;
    }
    bool ok = b.state == ResendState::manual
                  ? transition(tx, b.id, ResendState::manual, ResendState::pending, actor, "resend retry", now,
                               ", next_attempt_at = $5, expires_at = $6", {now, now + expiry_ms})
                  : tx.exec("UPDATE resend_bill SET next_attempt_at = $2, updated_at = $2 WHERE id = $1 AND state = 'pending'",
                            {b.id, now}) == 1;
    if (!ok) {
      out.message = "bill " + bill_no + " changed concurrently: nothing changed";
      tx.rollback_only();
      return;
    }
    audit(tx, actor, "resend.retry", "resend_bill", bill_no, nlohmann::json{{"from", b.state}}.dump(), now);
    out.changed = true;
    out.message = std::string(dry_run ? "would make" : "made") + " bill " + bill_no + " due now (" + name(b.state) +
                  " -> pending)";
    if (dry_run) tx.rollback_only();
  });
  if (out.changed && !dry_run) out.bill = find_bill(s.autocommit(), bill_no);
  return out;
}

ResendChange abandon_resend(store::Store& s, const std::string& bill_no, const std::string& reason,
                            const std::string& actor, Millis now, bool dry_run) {
  ResendChange out;
  s.transact(store::TxMode::write, [&](store::Tx& tx) {
    out = ResendChange{};
    auto b = find_bill(tx, bill_no);
    const int64_t gid = b.grant_id;
    out.bill = b;
    const std::string why = "abandoned: " + reason;
    if (b.state == ResendState::done) {
      out.message =
          "bill " + bill_no + " is done (grant " + b.record_code + " is " + name(b.grant_state) + "): nothing changed";
      tx.rollback_only();
      return;
    }
    if (b.grant_state != GrantState::delayed_resend) {
      out.message = "grant " + b.record_code + " is " + name(b.grant_state) +
                    (b.grant_state == GrantState::issuing ? ": a delivery is in flight; let resend take it over first"
                                                : ": only a grant waiting for a resend can be abandoned") +
                    "; nothing changed";
      tx.rollback_only();
      return;
    }
    if (!transition(tx, gid, GrantState::delayed_resend, GrantState::failed, actor, why, now, ", reason = $5", {why}) ||
        !transition(tx, b.id, b.state, ResendState::done, actor, why, now, ", last_error = $5", {why})) {
      out.message = "bill " + bill_no + " changed concurrently: nothing changed";
      tx.rollback_only();
      return;
    }
    tx.exec("UPDATE delivery_bill SET state = 'abandoned', last_message = $2, updated_at = $3 WHERE bill_no = $1",
            {bill_no, why, now});
    auto rel = engine::release_holdings(tx, gid, actor, why, now);
    audit(tx, actor, "resend.abandon", "resend_bill", bill_no,
          nlohmann::json{{"record_code", b.record_code}, {"reason", reason}, {"released", rel ? rel->note : ""}}.dump(), now);
    out.changed = true;
    out.message = std::string(dry_run ? "would abandon" : "abandoned") + " bill " + bill_no + ": grant " +
                  b.record_code + " failed" + (rel ? "; " + rel->note : "");
    if (dry_run) tx.rollback_only();
  });
  if (out.changed && !dry_run) out.bill = find_bill(s.autocommit(), bill_no);
  return out;
}

}  // namespace rc::jobs
