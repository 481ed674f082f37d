// list-issue run: claims chunks of pending items, sends each through the engine's common flow and
// records every item's outcome — grants and item states in the same transaction, so a kill at any
// point leaves each item either pending (and its grant absent) or finished (with its grant).
// The unique biz_id "<batch>:<user>" is the second line of defence: an item whose grant exists
// (a twin, another host) is answered from that grant, never issued again.
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include "core/audit.hpp"
#include "core/interrupt.hpp"
#include "jobs/list_issue/list_issue.hpp"
#include "jobs/list_issue/internal.hpp"

namespace rc::jobs::list_issue {

namespace {

// Reasons that say "not now" rather than "never" (engine::is_transient): the chunk is rolled back
// and the run stops with its items still pending, so that pausing an activity does not reject the
// rest of the list. (A fuse does not stop the run: the engine holds such a claim and the item is
// recorded held; only a hold that could not be recorded answers held_by_fuse here.)

struct PendingItem {
  int64_t id;
  std::string user;
};

struct ItemOutcome {
  int64_t id;
  ListItemState state;  // issued | rejected | held
  std::optional<std::string> record_code, reason;
};

// Shared by the workers of one run.
struct Shared {
  const RunOptions& o;
  const BatchRow& b;
  std::mutex mu;
  Progress progress;
  std::atomic<int64_t> done{0}, issued{0}, rejected{0}, failed{0}, held{0};
  std::map<std::string, int64_t> reasons;  // under mu
  std::atomic<bool> stop{false}, interrupted{false}, cancelled{false};
  std::exception_ptr error;  // under mu: the first failure of any worker
  double next_slot = 0;      // under mu: --rate pacing, steady seconds
  int64_t chunk;             // items per transaction: at most a second's worth under --rate
  int64_t reserved = 0;      // under mu: items taken by chunks under way or finished (--limit)
  std::atomic<bool> stopped{false};  // --limit or --max-runtime
  Shared(const RunOptions& opts, const BatchRow& batch, int64_t pending)
      : o(opts), b(batch), progress(opts.progress, "run " + batch.batch_no, uint64_t(pending), "users"),
        chunk(opts.rate_per_s > 0 ? std::max<int64_t>(1, std::min<int64_t>(opts.chunk, int64_t(opts.rate_per_s)))
                                  : opts.chunk) {}

  // How many items the next chunk may take: the chunk size, less what --limit leaves after the
  // chunks of every worker; 0 when the runner says stop (signal, --limit, --max-runtime).
  int64_t reserve() {
    std::lock_guard<std::mutex> l(mu);
    if (!o.job) return chunk;
    int64_t n = o.job->more() ? o.job->allowance(chunk + reserved) - reserved : 0;
    if (n <= 0) {
      stopped = true;
      return 0;
    }
    reserved += n;
    return n;
  }
  // Gives back what a chunk reserved and did not take.
  void unreserve(int64_t n) {
    std::lock_guard<std::mutex> l(mu);
    reserved -= n;
  }
};

double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Waits for this chunk's slot under --rate. Returns false when interrupted while waiting.
bool pace(Shared& sh, int64_t n) {
  if (sh.o.rate_per_s <= 0) return true;
  double start;
  {
    std::lock_guard<std::mutex> l(sh.mu);
    start = std::max(steady_s(), sh.next_slot);
    sh.next_slot = start + double(n) / sh.o.rate_per_s;
  }
  while (steady_s() < start) {
    if (interrupted() || sh.stop) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(100, int64_t((start - steady_s()) * 1000) + 1)));
  }
  return true;
}

// Records each item's outcome: one conditional update (pending -> to) and one status-log row per
// item. PostgreSQL: one statement for the whole chunk. Throws when an item was not pending.
void record_items(store::Tx& tx, const std::vector<ItemOutcome>& outs, const std::string& actor, Millis now) {
  if (outs.empty()) return;
  int64_t n = 0;
  if (tx.dialect() == store::Dialect::postgres) {
    std::string values;
    store::Params p{now, actor};
    for (size_t i = 0; i < outs.size(); ++i) {
      size_t k = p.size() + 1;
      values += (i ? ", ($" : "($") + std::to_string(k) + "::bigint, $" + std::to_string(k + 1) + "::text, $" +
                std::to_string(k + 2) + "::text, $" + std::to_string(k + 3) + "::text)";
      p.insert(p.end(), {outs[i].id, name(outs[i].state), store::opt(outs[i].record_code), store::opt(outs[i].reason)});
    }
    n = tx.query("WITH v (id, state, record_code, reason) AS (VALUES " + values +
                     "), u AS (UPDATE list_item li SET state = v.state, record_code = v.record_code, reason = v.reason, "
                     "updated_at = $1 FROM v WHERE li.id = v.id AND li.state = 'pending' RETURNING li.id, li.state, "
                     "li.record_code, li.reason) " + kStatusLogInsert +
                     "SELECT 'list_item', u.id, 'pending', u.state, $2, COALESCE(u.reason, u.record_code), NULL, $1 "
                     "FROM u",
                     p)
            .affected;
  } else {
    for (auto& it : outs)
      n += transition(tx, it.id, ListItemState::pending, it.state, actor,
                      it.reason ? it.reason : it.record_code, now, ", record_code = $5, reason = $6",
                      {store::opt(it.record_code), store::opt(it.reason)});
  }
  if (n != int64_t(outs.size()))
    throw Error(Errc::busy, "items of the chunk changed concurrently (" + std::to_string(n) + " of " +
                                std::to_string(outs.size()) + " still pending): try again");
}

class Worker {
 public:
  Worker(Shared& sh, store::Store& st, const Clock& clock)
      : sh_(sh), st_(st), clock_(clock), engine_(st, clock, sh.o.engine) {}

  // Runs chunks until nothing is pending, the batch is no longer running, or a stop.
  void loop() {
    while (!sh_.stop) {
      if (interrupted()) {
        sh_.interrupted = true;
        return;
      }
      const int64_t want = sh_.reserve();
      if (want == 0) return;
      if (!pace(sh_, want)) {
        sh_.unreserve(want);
        continue;
      }
      size_t n = 0;
      const bool more = chunk(want, n);
      sh_.unreserve(want - int64_t(n));
      if (!more) return;
    }
  }

  // Dry run: every item once (keyset order), inside the caller's transaction, counted but rolled back.
  void dry_run(store::Tx& tx) {
    int64_t after = 0;
    while (true) {
      check_interrupted();
      const int64_t want = sh_.reserve();
      if (want == 0) return;
      auto items = select(tx, after, want);
      sh_.unreserve(want - int64_t(items.size()));
      if (items.empty()) return;
      after = items.back().id;
      process(tx, items);
      count();
      advance(int64_t(items.size()));
    }
  }

 private:
  std::vector<PendingItem> select(store::Tx& tx, int64_t after, int64_t limit) {
    std::string sql = "SELECT id, user_id FROM list_item WHERE batch_id = $1 AND state = 'pending' AND id > $2 "
                      "ORDER BY id LIMIT $3";
    // Several processes share a batch: each locks its own chunk and skips the others'.
    if (!sh_.o.dry_run) sql += tx.lock_rows(store::Lock::update_skip_locked);
    auto r = tx.query(sql, {sh_.b.id, after, limit});
    std::vector<PendingItem> out;
    out.reserve(r.size());
    for (auto& row : r.rows) out.push_back({row.i64(0), row.str(1)});
    return out;
  }

  // An activity taken offline answers not_live for good: its items are rejected, not retried.
  bool offline(store::Tx& tx) {
    auto a = tx.query("SELECT state FROM activity WHERE id = $1", {sh_.b.activity_id});
    return !a.empty() && state_from_db<ActivityState>(a[0].str(0)) == ActivityState::offline;
  }

  // The common flow for each item of the chunk, then the items' outcomes. Returns the grants to deliver.
  std::vector<int64_t> process(store::Tx& tx, const std::vector<PendingItem>& items) {
    std::vector<engine::ClaimRequest> reqs(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      auto& r = reqs[i];
      r.activity = sh_.b.activity;
      r.user = items[i].user;
      r.biz_id = item_biz_id(sh_.b.batch_no, items[i].user);
      r.prize = sh_.b.prize;
      r.source = "list-issue";
      r.list_item_id = items[i].id;
    }
    auto outs = engine_.claim_many(tx, reqs);
    std::vector<ItemOutcome> rec;
    std::vector<int64_t> deliver;
    rec.reserve(outs.size());
    std::map<std::string, int64_t> reasons;
    int64_t issued = 0, held = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      auto& o = outs[i];
      if (o.status == engine::Status::held) {
        // a fuse blocks the prize: the item waits on its held grant, the run goes on
        rec.push_back({items[i].id, ListItemState::held, o.grant->record_code, std::string(name(o.reason))});
        ++held;
      } else if (o.status == engine::Status::rejected) {
        if (engine::is_transient(o.reason) && !(o.reason == engine::Reason::not_live && offline(tx)))
          throw Error(Errc::busy, "activity " + sh_.b.activity + " answers " + name(o.reason) + " for user " +
                                      items[i].user + ": the run stops with the batch resumable; run it again "
                                      "when the activity issues again");
        rec.push_back({items[i].id, ListItemState::rejected, std::nullopt, std::string(name(o.reason))});
        ++reasons[name(o.reason)];
      } else {
        rec.push_back({items[i].id, ListItemState::issued, o.grant->record_code, std::nullopt});
        ++issued;
        if (o.ladder) pending_ladder_.push_back(*o.ladder);
        if (o.grant->state == GrantState::init) deliver.push_back(o.grant->id);
      }
    }
    record_items(tx, rec, sh_.o.operator_name, clock_.now_ms());
    pending_issued_ = issued;
    pending_held_ = held;
    pending_reasons_ = std::move(reasons);
    return deliver;
  }

  // One chunk in one transaction. Returns false when there is nothing more to do for this worker.
  bool chunk(int64_t want, size_t& n) {
    std::vector<int64_t> deliver;
    bool running = true;
    std::optional<ListBatchState> state;
    st_.transact(store::TxMode::write, [&](store::Tx& tx) {
      deliver.clear();
      n = 0;
      pending_issued_ = pending_held_ = 0;
      pending_reasons_.clear();
      pending_ladder_.clear();
      // A cancel (or another worker's done) ends the run after the chunk that is under way.
      auto s = tx.query("SELECT state FROM list_batch WHERE id = $1", {sh_.b.id});
      state.reset();
      if (!s.empty()) state = state_from_db<ListBatchState>(s[0].str(0));
      running = state == ListBatchState::running;
      if (!running) {
        tx.rollback_only();
        return;
      }
      auto items = select(tx, 0, want);
      n = items.size();
      if (n) deliver = process(tx, items);
    });
    if (!running) {
      if (state == ListBatchState::cancelled) sh_.cancelled = true;
      return false;
    }
    if (n == 0) return false;
    count();  // once the chunk is committed: a retried transaction counts once
    deliver_after_commit(deliver);
    for (auto& m : pending_ladder_) engine_.announce_ladder(m);  // budget ladder steps: log line, alert
    advance(int64_t(n));
    return true;
  }

  // Grants whose channel is outside the database (and any an in-database channel left in init):
  // delivered now; a definite "no" turns the item failed, an unknown outcome waits for resend.
  void deliver_after_commit(const std::vector<int64_t>& grants) {
    for (int64_t id : grants) {
      auto d = engine_.deliver(id);
      if (d.state != GrantState::failed) continue;
      const std::string why = (d.code.empty() ? "" : d.code + ": ") + d.message;
      st_.transact(store::TxMode::write, [&](store::Tx& tx) {
        auto it = tx.query("SELECT id FROM list_item WHERE batch_id = $1 AND record_code = (SELECT record_code FROM "
                           "grants WHERE id = $2)",
                           {sh_.b.id, id});
        if (it.empty()) return;
        if (transition(tx, it[0].i64(0), ListItemState::issued, ListItemState::failed, sh_.o.operator_name, why,
                       clock_.now_ms(), ", error = $5", {why}))
          tx.exec("UPDATE list_batch SET last_error = $1 WHERE id = $2", {why, sh_.b.id});
      });
      ++sh_.failed;
    }
  }

  // Adds the outcomes of the last processed chunk to the run's counts.
  void count() {
    sh_.issued += pending_issued_;
    sh_.held += pending_held_;
    int64_t rej = 0;
    {
      std::lock_guard<std::mutex> l(sh_.mu);
      for (auto& [k, v] : pending_reasons_) {
        sh_.reasons[k] += v;
        rej += v;
      }
    }
    sh_.rejected += rej;
  }

  void advance(int64_t n) {
    int64_t done = sh_.done += n;
    std::lock_guard<std::mutex> l(sh_.mu);
    // Progress looks at the clock every few hundred updates: one update per item.
    for (int64_t i = done - n + 1; i <= done; ++i) sh_.progress.update(i, uint64_t(i));
  }

  Shared& sh_;
  store::Store& st_;
  const Clock& clock_;
  engine::Engine engine_;
  int64_t pending_issued_ = 0, pending_held_ = 0;
  std::map<std::string, int64_t> pending_reasons_;
  std::vector<LadderMove> pending_ladder_;
};

std::optional<ListBatchState> batch_state(store::Store& st, int64_t batch_id) {
  // PostgreSQL: FOR SHARE waits for a cancel in flight (it updates the batch row first, then locks
  // the pending items, so a worker's SKIP LOCKED chunk came back empty) and reads its outcome;
  // a plain read would see "running" and the worker would end as if the batch were done.
  auto r = st.query(std::string("SELECT state FROM list_batch WHERE id = $1") + st.lock_rows(store::Lock::share),
                    {batch_id});
  if (r.empty()) return std::nullopt;
  return state_from_db<ListBatchState>(r[0].str(0));
}

int64_t count_pending(store::Session& s, int64_t batch_id) {
  return s.query("SELECT COUNT(*) FROM list_item WHERE batch_id = $1 AND state = 'pending'", {batch_id})[0].i64(0);
}

// Refuses what may not run; moves approved -> running. Returns the batch as it is now.
BatchRow start(store::Store& st, const RunOptions& o, Millis now, bool& resumed) {
  BatchRow b;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    b = get_batch(tx, o.batch_no, true);
    using B = ListBatchState;
    if (b.state == B::planned)
      throw Error(Errc::not_permitted, "batch " + b.batch_no + " is planned, not approved: a second operator approves it "
                                       "first (rewardctl list-issue approve " + b.batch_no + " --operator NAME)");
    if (b.state == B::cancelled) throw Error(Errc::not_permitted, "batch " + b.batch_no + " is cancelled: it cannot run");
    if (b.state == B::done) {
      tx.rollback_only();
      return;
    }
    if (!b.approved_fingerprint || *b.approved_fingerprint != fingerprint(b))
      throw Error(Errc::not_permitted, "batch " + b.batch_no + " does not match what " + b.approved_by.value_or("?") +
                                           " approved: plan and approve it again");
    auto a = tx.query("SELECT definition_hash FROM activity WHERE id = $1", {b.activity_id});
    const std::string now_hash = a.empty() ? "" : a[0].str(0);
    if (now_hash != b.definition_hash)
      throw Error(Errc::conflict, "activity " + b.activity + " changed since batch " + b.batch_no + " was planned: " +
                                      "definition hash " + b.definition_hash + " when planned, " + now_hash +
                                      " now; plan and approve a new batch for the new definition");
    resumed = b.state == B::running;
    if (o.dry_run || resumed) {
      tx.rollback_only();
      return;
    }
    if (!move_batch(tx, b, B::approved, B::running, o.operator_name, "run", now))
      throw Error(Errc::busy, "batch " + b.batch_no + " changed concurrently: try again");
    b.state = B::running;
  });
  return b;
}

// A crash between a chunk's commit and the deliveries after it (channels outside the database)
// leaves grants in init: deliver them now.
int64_t deliver_stranded(store::Store& st, const BatchRow& b, engine::Engine& eng) {
  auto r = st.query(
      "SELECT g.id FROM list_item li JOIN grants g ON g.record_code = li.record_code WHERE li.batch_id = $1 "
      "AND li.state = 'issued' AND g.state = 'init'",
      {b.id});
  for (auto& row : r.rows) eng.deliver(row.i64(0));
  return int64_t(r.size());
}

// running -> done once nothing is pending (items another worker holds still count as pending) and
// nothing waits on a fuse (held items: the batch stays running until their decision, and a run
// after it closes the batch).
void finish(store::Store& st, const BatchRow& b, const std::string& actor, Millis now) {
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    if (count_pending(tx, b.id) > 0 ||
        tx.query("SELECT 1 FROM list_item WHERE batch_id = $1 AND state = 'held' LIMIT 1", {b.id}).size() > 0) {
      tx.rollback_only();
      return;
    }
    if (move_batch(tx, b, ListBatchState::running, ListBatchState::done, actor, "no item pending", now))
      audit(tx, actor, "list_issue.done", "list_batch", b.batch_no, "{}", now);
  });
}

}  // namespace

RunResult run(store::Store& st, const RunOptions& o, const Clock& clock) {
  auto t0 = std::chrono::steady_clock::now();
  if (o.chunk < 1 || o.chunk > kMostChunk)
    throw Error(Errc::usage, "the chunk size must be between 1 and " + std::to_string(kMostChunk));
  if (o.workers < 1) throw Error(Errc::usage, "--workers must be at least 1");
  RunResult res;
  res.batch_no = o.batch_no;
  res.dry_run = o.dry_run;
  bool resumed = false;
  BatchRow b = start(st, o, clock.now_ms(), resumed);
  if (b.state != ListBatchState::done) {
    const int64_t pending = count_pending(st.autocommit(), b.id);
    Shared sh(o, b, pending);
    if (o.dry_run) {
      Worker w(sh, st, clock);
      st.transact(store::TxMode::write, [&](store::Tx& tx) {
        sh.issued = sh.rejected = sh.done = sh.held = 0;
        sh.reasons.clear();
        w.dry_run(tx);
        tx.rollback_only();
      });
    } else {
      if (resumed) {
        engine::Engine eng(st, clock, o.engine);
        if (int64_t n = deliver_stranded(st, b, eng)) spdlog::info("delivered {} grants an earlier run left undelivered", n);
      }
      std::vector<std::unique_ptr<store::Store>> stores;
      std::vector<std::thread> threads;
      auto body = [&](store::Store& s) {
        try {
          Worker(sh, s, clock).loop();
        } catch (const Error& e) {
          // a signal cancels the statement in progress: the chunk rolled back, those committed stay
          std::lock_guard<std::mutex> l(sh.mu);
          if (e.kind() == Errc::interrupted) sh.interrupted = true;
          else if (!sh.error) sh.error = std::current_exception();
          sh.stop = true;
        } catch (...) {
          std::lock_guard<std::mutex> l(sh.mu);
          if (!sh.error) sh.error = std::current_exception();
          sh.stop = true;
        }
      };
      for (int i = 1; i < o.workers; ++i) {
        if (!o.open_store) throw Error(Errc::internal, "--workers needs a way to open more connections");
        stores.push_back(o.open_store());
      }
      for (auto& s : stores) threads.emplace_back(body, std::ref(*s));
      body(st);
      for (auto& t : threads) t.join();
      // The workers are done: what follows on st is bookkeeping, which a cancel sent for a worker's
      // last statement must not stop (Store::cancel_on_signal).
      store::SignalsSpare spare(st);
      sh.progress.finish();
      if (sh.error) {
        try {
          std::rethrow_exception(sh.error);
        } catch (const std::exception& e) {
          // The batch stays running and resumable; the error is what `status` shows.
          try {
            st.exec("UPDATE list_batch SET last_error = $1 WHERE id = $2", {std::string(e.what()).substr(0, 500), b.id});
          } catch (...) {
          }
          throw;
        }
      }
      res.interrupted = sh.interrupted || interrupted();
      // A cancel that commits while a worker's chunk looks for items leaves that chunk empty (the
      // cancelled items are no longer pending) rather than showing the state: ask the batch itself.
      res.cancelled = sh.cancelled || batch_state(st, b.id) == ListBatchState::cancelled;
      res.stopped = sh.stopped && !res.interrupted;
      if (!res.interrupted && !res.cancelled && !res.stopped) finish(st, b, o.operator_name, clock.now_ms());
    }
    res.issued = sh.issued;
    res.rejected = sh.rejected;
    res.failed = sh.failed;
    res.held = sh.held;
    res.reasons = sh.reasons;
  }
  auto s = status(st, o.batch_no, clock.now_ms());
  res.state = s.state;
  res.total = s.total;
  res.pending = s.pending;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace rc::jobs::list_issue
