#pragma once
// The issuance engine: one request becomes at most one grant, whatever the concurrency, retries or
// crashes. Every caller (claim CLI, list-issue, jobs, tests, benchmarks) goes through Engine::claim.
//
// The common flow (DESIGN §4), in this order and for every kind (each rule in the file named after it):
//   1 idempotency by biz_id (a replay returns the original grant and changes nothing)   idempotency
//   2 activity: exists, live (or gray and the user on the gray list), time inside the window   activity_gate
//   3 qualification, when the activity requires one: exists and unused -> used   qualification
//   4 risk: blacklist, fuse   risk
//   5 per-user limit for the current period (a conditional counter update)   limits
//   6 prize selection (kinds differ only here: direct, lottery draw, redpack amount)   prize_selection
//   7 grant row (init) + status log: the unique biz_id decides between concurrent twins   grant_row
//   8 budget, then stock: conditional updates on the hot rows, last, so their locks are held for
//     the shortest time   budget, stock
//   all of 1-8 in one transaction; then
//   9 delivery: a channel in the database (ledger, outbox) in that same transaction, init -> success
//     | awaiting_external, one commit for all   deliver_inline; a remote channel (webhook) after
//     commit: init -> issuing with a persisted bill number, then the call   deliver
// On PostgreSQL the common claim (a direct prize; ledger, webhook or no delivery) runs all of this as
// one statement first (claim_one.hpp); whatever it does not grant goes through the steps above.
// After the claim: reversal (reversal.hpp), the outbox's answer (completion.hpp), reads (grant_view.hpp).
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <spdlog/common.h>

#include "core/alert_outbox.hpp"
#include "core/clock.hpp"
#include "core/delivery/channel.hpp"
#include "core/engine/channel.hpp"
#include "core/budget_ladder.hpp"
#include "core/engine/grant_view.hpp"
#include "core/engine/reason.hpp"
#include "core/store/store.hpp"

namespace rc::engine {

struct ClaimRequest {
  std::string activity;  // activity code
  std::string user;
  std::string biz_id;    // the caller's idempotency key
  std::optional<std::string> source;  // the caller's channel (app, web, ...), recorded on the grant
  std::optional<std::string> prize;   // direct: which prize (default: the first); list-issue sets it
  std::optional<int64_t> list_item_id;
  bool deliver = true;                // false: stop after commit (the caller delivers later)
  bool dry_run = false;               // run every check and write, then roll back; no delivery
  // (internal) a lottery's value or a red packet's amount the one-statement path already drew, for
  // the activity version it was drawn under: the full flow keeps it rather than drawing again (a
  // refused draw gets no second chance)
  struct Drawn {
    int64_t version = 0, value = 0;
  };
  std::optional<Drawn> drawn;
  // The value drawn under `version`, if any (a draw under another version's rules is not kept).
  std::optional<int64_t> drawn_under(int64_t version) const {
    if (drawn && drawn->version == version) return drawn->value;
    return std::nullopt;
  }
};

// held: a fuse blocks the prize or activity; the request is kept as a pending grant (held.hpp)
enum class Status { granted, replayed, rejected, held };
const char* status_name(Status s);

struct ClaimOutcome {
  Status status = Status::rejected;
  Reason reason = Reason::none;  // rejected: any but none and budget_degrade (reason.hpp); held: held_by_fuse
  std::optional<GrantView> grant;  // granted, replayed, held: the grant (held: state pending)
  bool dry_run = false;  // granted would have happened; nothing was kept
  int64_t duration_us = 0;
  // granted: the budget ladder step this claim moved (budget_ladder.hpp). Engine::claim announces it
  // after its commit; a claim_many caller announces it after committing (Engine::announce_ladder).
  std::optional<LadderMove> ladder;
};

struct DeliveryOutcome {
  GrantState state = GrantState::init;  // the grant's state afterwards
  delivery::Outcome outcome = delivery::Outcome::unknown;
  std::string code, message;
  bool delivered_now = false;  // false: another process owned the delivery, or nothing to do
};

struct EngineOptions {
  std::string actor = "rewardctl";
  std::map<std::string, delivery::ChannelConfig> channels;  // from parse_channels (ledger, outbox built in)
  GetEnv getenv;                 // resolves channel secrets
  // Builds each configured channel on its first delivery (channel.hpp). Empty: the built-in
  // make_channel (ledger, outbox, webhook).
  ChannelFactory make_channel;
  int64_t resend_first_delay_ms = 60'000;
  int64_t resend_expiry_ms = 5LL * 24 * 3600 * 1000;
  int64_t sold_out_memory_ms = 2'000;  // a prize seen sold out is rejected without a write for this long
  // PostgreSQL: the common claim (a direct prize through the built-in ledger) as one statement, one
  // round trip (claim_one.hpp); the full flow decides whatever it does not grant. false: always the
  // full flow (tests compare the two).
  bool one_statement_claims = true;
  // A random value, uniform in [0, total) (total > 0): a lottery's draw, a red packet's amount.
  // Empty: the secure-seeded generator (lottery.hpp). Tests set it to make draws known.
  std::function<int64_t(int64_t total)> draw_below;
  // Posts an alert queued by a budget ladder step move, after its commit (the CLI posts the signed
  // [alerts] webhook). Empty: no webhook configured, the alert is recorded as skipped.
  AlertPoster post_alert;
  // The level of the one line each claim() logs (serve logs each request itself, and sets debug).
  spdlog::level::level_enum claim_log_level = spdlog::level::info;
};

struct HeldResult;       // what became of a held grant (held.hpp)
struct ActivityCatalog;  // cached static configuration of one activity version (engine internals)
struct PrizeInfo;        // one prize of an ActivityCatalog

// What a granted claim would have taken from the hot rows (budget, stock) when claim_many defers
// those takes to the end of its chunk.
struct HotTake {
  int64_t activity_id = 0, cost_cents = 0, prize_id = 0, bucket = 0;
  bool budget = false;  // the activity has a budget to take cost_cents from
};

// The result of steps 1-8 for one request inside a caller's transaction (Engine::claim_step).
struct StepResult {
  enum Kind { granted, rejected, twin } kind = rejected;
  Reason reason = Reason::none;  // rejected: why
  GrantView grant;     // granted: the new grant (state init)
  std::optional<int64_t> blocked_prize;  // rejected held_by_fuse: the blocked prize (none: the activity)
  std::optional<ClaimRequest::Drawn> drawn;  // rejected: the lottery draw it made (a held request keeps it)
  std::optional<LadderMove> ladder;      // granted: the budget ladder step it moved
  std::optional<HotTake> deferred;       // granted with defer_hot_rows: what it has not taken yet
};

class Engine {
 public:
  Engine(store::Store& st, const Clock& clock, EngineOptions opts);
  ~Engine();

  ClaimOutcome claim(const ClaimRequest& r);
  // Step 9 for one grant: moves init|delayed_resend -> issuing (only the winner of that move
  // delivers), persists or reuses the bill number, calls the channel, records the outcome.
  DeliveryOutcome deliver(int64_t grant_id);
  // Decides one held grant (held.hpp) by sending it through steps 2-8 again, then delivers it when
  // granted. dry_run: the same steps, rolled back; result would_grant or would_reject.
  HeldResult release_held(int64_t grant_id, bool dry_run);
  // The held grants `ids` decided as release_held decides each, in one transaction: each under its
  // own savepoint, in one lock order (by user), the hot-row takes made once at the chunk's end as
  // claim_many makes them, a channel in the database delivering in the same commit, the others
  // after it. One commit and one stock/budget update per chunk is what lets a release keep pace
  // with claims running beside it (bench/release). Results in the order of `ids`; an id with no
  // grant is left out.
  std::vector<HeldResult> release_held_many(const std::vector<int64_t>& ids, bool dry_run);

  // Steps 1-8 of the common flow for several requests inside the caller's transaction tx: many
  // grants per commit (list-issue). Each request runs under its own savepoint, so a rejection undoes
  // only what that request wrote. A request whose biz_id already has a grant is answered from it
  // (replayed, or rejected biz_id_conflict for another user or activity), exactly as claim() does.
  // With r.deliver, a grant whose channel is in the database (ledger, outbox) is delivered in tx too
  // (one commit for claim and delivery); the others stay in init for the caller to deliver() after
  // its commit. REQUIRES: tx is a write transaction of this engine's store; r.dry_run is ignored.
  // Outcomes are in request order. See claim_many.cpp.
  // The hot rows: every grant of a chunk taking stock (and budget) as it goes would hold those rows
  // locked from the chunk's first grant to its commit, so that concurrent workers of one batch ran
  // one chunk at a time. For a direct prize without a budget ladder, each request's take is
  // therefore deferred and the chunk takes them at its end, one conditional update per bucket
  // (remain >= n) and one for the budget, just before the caller commits. When one of them does
  // not fit, the chunk is rolled back to its start and runs again taking as it goes, so that each
  // request gets exactly the answer (granted, sold_out, budget_exhausted) it gets from claim().
  // After such a chunk, this engine's chunks of that activity take as they go for
  // sold_out_memory_ms (known_uncovered), so that a batch's tail past its budget does not run twice.
  std::vector<ClaimOutcome> claim_many(store::Tx& tx, const std::vector<ClaimRequest>& rs);

  // Delivers grant g inside the caller's transaction tx when its channel is in the database
  // (ledger, outbox): one conditional move init -> success | awaiting_external with everything that
  // follows from it (deliver_inline.hpp). True, with g's state and bill number updated. False, with
  // nothing written, for a channel outside the database (webhook: deliver() it after commit) or a
  // grant that is not in init. REQUIRES: g was read or written in tx.
  bool deliver_in(store::Tx& tx, GrantView& g);

  // Tells people about a budget ladder step move once it is committed: one log line (WARN going up,
  // INFO going back down) and, going up, the alert the move queued (post_alert; a failed post is
  // left pending for fuse-scan). REQUIRES: m is committed.
  void announce_ladder(const LadderMove& m);

  store::Store& store() { return st_; }
  // What this engine was built with: another engine on a companion store works alike (a release's
  // workers, jobs/fuse/decide.cpp).
  const Clock& clock() const { return clock_; }
  const EngineOptions& options() const { return opts_; }

 private:
  friend struct ClaimRun;
  // Steps 1-8 for one request in tx. On anything but granted the caller rolls back what it wrote.
  StepResult claim_step(store::Tx& tx, const ClaimRequest& r, Millis now, bool defer_hot_rows = false);
  // claim_many for requests ordered by user (bytewise).
  std::vector<ClaimOutcome> claim_in_user_order(store::Tx& tx, const std::vector<ClaimRequest>& rs);
  // claim_many's pass over the requests; defer: collect the hot-row takes instead of making them.
  std::vector<ClaimOutcome> claim_each(store::Tx& tx, const std::vector<ClaimRequest>& rs,
                                       std::vector<HotTake>* defer);
  struct Phase1;  // deliver.cpp
  bool deliver_phase1(store::Tx& tx, int64_t grant_id, Phase1& p);
  // Records r as a pending grant held by the open event that blocks it (activity-wide, or
  // blocked_prize's), answering `out`, as decide_hold (held.hpp) says; run_again and give_up
  // write nothing and leave `out` as it was.
  int hold(const ClaimRequest& r, Millis now, std::optional<int64_t> blocked_prize, int reruns_done,
           ClaimOutcome& out);
  std::shared_ptr<const ActivityCatalog> catalog(store::Session& s, const std::string& code, int64_t id,
                                                 int64_t version);
  void deliver_after_commit(ClaimOutcome& out);
  // The claim as one statement (claim_one.hpp) when it applies: the granted grant, or nullopt
  // (nothing written) when the full flow has to run.
  // A lottery or red packet it drew for is left in `drawn` (also when it did not grant), for the full
  // flow.
  std::optional<GrantView> claim_in_one(const ClaimRequest& r, Millis now, std::optional<ClaimRequest::Drawn>& drawn);
  // claim_many's chunk as one statement (claim_one.hpp) when every request qualifies: the outcomes
  // (all granted), or nullopt (nothing written) when the chunk has to run through the full flow.
  std::optional<std::vector<ClaimOutcome>> claim_chunk_in_one(store::Tx& tx, const std::vector<ClaimRequest>& rs,
                                                              Millis now);
  // Whether the one-statement paths may answer r at all (PostgreSQL, switched on, callable, not a
  // dry run).
  bool one_statement_allowed(const ClaimRequest& r) const;
  // The rules of r's activity for the one-statement paths: cached, else read on s; nullptr when
  // there is no such activity.
  std::shared_ptr<const ActivityCatalog> one_statement_catalog(store::Session& s, const std::string& activity);
  // The prize r would get on the one-statement paths, and whether the statement credits it through
  // the ledger (else it stays in init); nullptr when only the full flow may answer r.
  const PrizeInfo* one_statement_prize(const ActivityCatalog& cat, const ClaimRequest& r, bool& ledger_now,
                                       std::optional<ClaimRequest::Drawn>* drawn = nullptr);
  // A random value in [0, total): opts_.draw_below, else the generator (lottery.hpp).
  int64_t draw_below(int64_t total) const;
  // The function could not be called (no EXECUTE, or not installed): said once, full flow from then on.
  void one_statement_unavailable(const char* function, const Error& e);
  // The cached rules of activity `code` as last read (any version), or nullptr.
  std::shared_ptr<const ActivityCatalog> cached_catalog(const std::string& code);
  bool known_sold_out(int64_t prize_id);
  void remember_sold_out(int64_t prize_id);
  // claim_many: an activity whose last chunk the deferred takes did not cover (its budget or a
  // bucket short) - its chunks take as they go for sold_out_memory_ms instead of running twice.
  bool known_uncovered(const std::string& activity) { return recently(uncovered_, activity); }
  void remember_uncovered(const std::string& activity) { remember(uncovered_, activity); }
  // claim_many: an activity a chunk of which the one statement refused (claim_chunk_in_one)
  // recently - for sold_out_memory_ms its chunks go straight to the full flow.
  bool known_chunk_refused(const std::string& activity) { return recently(chunk_refused_, activity); }
  void remember_chunk_refused(const std::string& activity) { remember(chunk_refused_, activity); }
  // Whether activity was remembered in `seen` within sold_out_memory_ms; remembers it now.
  bool recently(std::map<std::string, Millis>& seen, const std::string& activity);
  void remember(std::map<std::string, Millis>& seen, const std::string& activity);
  // The channel named `name`, built on first use by opts_.make_channel; nullptr when this host has
  // no such channel configured. Throws what the factory throws (Error(config)).
  Channel* channel(const std::string& name);

  store::Store& st_;
  const Clock& clock_;
  EngineOptions opts_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const ActivityCatalog>> catalogs_;
  std::map<int64_t, Millis> sold_out_;
  std::map<std::string, Millis> uncovered_;
  std::map<std::string, Millis> chunk_refused_;
  std::map<std::string, std::unique_ptr<Channel>> built_channels_;
  // the one-statement claim could not be called (no EXECUTE, or no function): full flow from now on
  std::atomic<bool> one_statement_off_{false};
};

}  // namespace rc::engine
