// Engine::claim: steps 1-8 of the common flow in one transaction, then delivery (step 9).
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <set>

#include "core/audit.hpp"
#include "core/engine/internal.hpp"
#include "core/hash.hpp"

namespace rc::engine {

namespace {

// A concurrent twin with the same biz_id committed first: abandon this transaction.
struct TwinWon {};

struct Rejection {
  std::string reason;
};

}  // namespace

Engine::Engine(store::Store& st, const Clock& clock, EngineOptions opts)
    : st_(st), clock_(clock), opts_(std::move(opts)) {
  if (!opts_.getenv) opts_.getenv = [](const char* n) { return std::getenv(n); };
  for (const char* builtin : {"ledger", "outbox"}) {
    if (opts_.channels.count(builtin)) continue;
    delivery::ChannelConfig c;
    c.name = c.type = builtin;
    opts_.channels[builtin] = c;
  }
}

Engine::~Engine() = default;

std::shared_ptr<const ActivityCatalog> Engine::catalog(store::Session& s, const std::string& code, int64_t id,
                                                       int64_t version) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = catalogs_.find(code);
    if (it != catalogs_.end() && it->second->id == id && it->second->version == version) return it->second;
  }
  auto c = load_catalog(s, id);
  std::lock_guard<std::mutex> l(mu_);
  catalogs_[code] = c;
  return c;
}

// Sold-out memory uses the steady clock: the business clock may be fixed (REWARDCTL_NOW).
static int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Engine::known_sold_out(int64_t prize_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = sold_out_.find(prize_id);
  if (it == sold_out_.end()) return false;
  if (steady_ms() - it->second > opts_.sold_out_memory_ms) {
    sold_out_.erase(it);
    return false;
  }
  return true;
}

void Engine::remember_sold_out(int64_t prize_id) {
  std::lock_guard<std::mutex> l(mu_);
  sold_out_[prize_id] = steady_ms();
}

// One claim's work inside its transaction. Rejections are thrown as Rejection and roll back.
struct ClaimRun {
  Engine& e;
  const ClaimRequest& r;
  store::Tx& tx;
  Millis now;
  GrantView g;

  void limit_up(const std::string& scope, const std::string& period_key, int64_t limit) {
    if (limit <= 0) throw Rejection{"limit_reached"};
    int64_t n = tx.exec(
        "INSERT INTO limit_counter (scope, user_id, period_key, used, updated_at) VALUES ($1, $2, $3, 1, $4) "
        "ON CONFLICT (scope, user_id, period_key) DO UPDATE SET used = limit_counter.used + 1, "
        "updated_at = excluded.updated_at WHERE limit_counter.used < $5",
        {scope, r.user, period_key, now, limit});
    if (n != 1) throw Rejection{"limit_reached"};
  }

  int64_t draw_count(int64_t activity_id) {
    auto res = tx.query(
        "INSERT INTO limit_counter (scope, user_id, period_key, used, updated_at) VALUES ($1, $2, 'total', 1, $3) "
        "ON CONFLICT (scope, user_id, period_key) DO UPDATE SET used = limit_counter.used + 1, "
        "updated_at = excluded.updated_at RETURNING used",
        {scope_draws(activity_id), r.user, now});
    return res[0].i64(0);
  }

  void run() {
    // 2. the activity and everything about this user that risk needs, in one round trip
    auto a = tx.query(
        "SELECT a.id, a.state, a.version, a.start_at, a.end_at, "
        "CASE WHEN EXISTS (SELECT 1 FROM activity_user_list l WHERE l.activity_id = a.id AND l.list = 'gray' "
        "AND l.user_id = $2) THEN 1 ELSE 0 END, "
        "CASE WHEN EXISTS (SELECT 1 FROM activity_user_list l WHERE l.activity_id = a.id AND l.list = 'black' "
        "AND l.user_id = $2) THEN 1 ELSE 0 END, "
        "CASE WHEN EXISTS (SELECT 1 FROM fuse_event f WHERE f.activity_id = a.id AND f.state = 'tripped' "
        "AND f.prize_id IS NULL) THEN 1 ELSE 0 END, "
        "CASE WHEN EXISTS (SELECT 1 FROM prize p WHERE p.activity_id = a.id AND p.blocked = 1) THEN 1 ELSE 0 END, "
        "(SELECT g.id FROM grants g WHERE g.biz_id = $3) "
        "FROM activity a WHERE a.code = $1",
        {r.activity, r.user, r.biz_id});
    // 1. idempotency, answered by the same round trip: a replay has no second effect.
    if (!a.empty() && !a[0].is_null(9)) throw TwinWon{};
    if (a.empty()) {
      if (!tx.query("SELECT 1 FROM grants WHERE biz_id = $1", {r.biz_id}).empty()) throw TwinWon{};
      throw Rejection{"not_found"};
    }
    const auto& ar = a[0];
    const int64_t activity_id = ar.i64(0);
    const std::string state = ar.str(1);
    if (state == "ended") throw Rejection{"ended"};
    if (state != "live" && state != "gray" && state != "paused") throw Rejection{"not_live"};
    if (now < ar.i64(3)) throw Rejection{"not_started"};
    if (now >= ar.i64(4)) throw Rejection{"ended"};
    if (state == "paused") throw Rejection{"paused"};
    if (state == "gray" && ar.i64(5) == 0) throw Rejection{"not_in_gray_list"};
    auto cat = e.catalog(tx, r.activity, activity_id, ar.i64(2));

    // 3. qualification (whitelist): unused -> used, decided by the conditional update
    std::optional<int64_t> qual_id;
    if (cat->whitelist_required) {
      auto q = tx.query(
          "UPDATE qualification SET status = 'used', updated_at = $3 WHERE activity_id = $1 AND user_id = $2 "
          "AND status = 'unused' AND (expires_at IS NULL OR expires_at > $3) RETURNING id",
          {activity_id, r.user, now});
      if (q.empty()) {
        auto s = tx.query("SELECT status FROM qualification WHERE activity_id = $1 AND user_id = $2",
                          {activity_id, r.user});
        throw Rejection{!s.empty() && s[0].str(0) == "used" ? "qualification_used" : "not_qualified"};
      }
      qual_id = q[0].i64(0);
    }

    // 4. risk
    if (ar.i64(6)) throw Rejection{"blacklisted"};
    if (ar.i64(7)) throw Rejection{"held_by_fuse"};
    std::set<int64_t> blocked;
    if (ar.i64(8)) {
      auto b = tx.query("SELECT id FROM prize WHERE activity_id = $1 AND blocked = 1", {activity_id});
      for (auto& row : b.rows) blocked.insert(row.i64(0));
    }

    // 5. the per-user limit of the activity for the current period, in the activity's zone
    if (cat->limit) limit_up(scope_activity(activity_id), period_key(cat->limit_period, now, cat->timezone), *cat->limit);

    // 6. prize selection: the candidates, best first (a lottery degrades to its consolation prize)
    std::vector<size_t> candidates;
    std::optional<int64_t> draw_value;
    if (cat->prizes.empty()) throw Rejection{"sold_out"};
    if (cat->kind == "lottery") {
      std::optional<size_t> chosen;
      if (!cat->guarantees.empty()) {
        int64_t n = draw_count(activity_id);
        auto it = cat->guarantees.find(n);
        if (it != cat->guarantees.end()) chosen = it->second;
      }
      if (!chosen) {
        if (cat->pool.total() <= 0) throw Rejection{"sold_out"};
        draw_value = random_below(cat->pool.total());
        chosen = cat->pool.pick(*draw_value);
      }
      candidates.push_back(*chosen);
      if (cat->consolation && *cat->consolation != *chosen) candidates.push_back(*cat->consolation);
    } else if (r.prize) {
      const PrizeInfo* p = cat->prize(*r.prize);
      if (!p) throw Rejection{"not_found"};
      candidates.push_back(size_t(p - cat->prizes.data()));
    } else {
      candidates.push_back(0);
    }

    std::string last = "sold_out";
    for (size_t ci = 0; ci < candidates.size(); ++ci) {
      const PrizeInfo& p = cat->prizes[candidates[ci]];
      const bool fallback_left = ci + 1 < candidates.size();
      // A prize known sold out in this process is skipped without a write.
      if (e.known_sold_out(p.id)) {
        last = "sold_out";
        continue;
      }
      if (blocked.count(p.id)) {
        last = "held_by_fuse";
        continue;
      }
      if (fallback_left) tx.exec_script("SAVEPOINT candidate");
      try {
        grant_one(*cat, p, activity_id, ar.i64(2), draw_value, ci > 0 ? &cat->prizes[candidates[0]] : nullptr, qual_id);
        return;
      } catch (const Rejection& rej) {
        last = rej.reason;
        if (!fallback_left) throw;
        tx.exec_script("ROLLBACK TO SAVEPOINT candidate");
      }
    }
    throw Rejection{last};
  }

  // Steps 6b-8 for one candidate prize. Throws Rejection when this prize cannot be granted.
  void grant_one(const ActivityCatalog& cat, const PrizeInfo& p, int64_t activity_id, int64_t version,
                 std::optional<int64_t> draw_value, const PrizeInfo* degraded_from, std::optional<int64_t> qual_id) {
    if (p.limit) limit_up(scope_prize(p.id), period_key(p.limit_period, now, cat.timezone), *p.limit);
    int64_t amount = p.amount;
    if (cat.kind == "redpack" && p.amount_max) {
      amount = random_between(p.amount, *p.amount_max);
      if (cat.has_budget && p.unit_cost_cents > 0) {
        // Never more than the budget left: the conditional update below still decides.
        auto b = tx.query("SELECT authorised_cents - consumed_cents FROM budget WHERE activity_id = $1", {activity_id});
        int64_t left_units = b.empty() ? 0 : b[0].i64(0) / p.unit_cost_cents;
        if (left_units < p.amount) throw Rejection{"budget_exhausted"};
        amount = std::min(amount, left_units);
      }
    }
    // Refuse before writing anything when this host cannot deliver the prize: a grant must never
    // be stranded (or invalidated) by one host's incomplete [channels] configuration.
    if (!e.opts_.channels.count(p.channel))
      throw Error(Exit::config, "item '" + p.item + "' is delivered by channel '" + p.channel +
                                    "', which is not configured on this host: add [channels." + p.channel + "]");
    int64_t cost = 0, validity_ms = 0;
    if (__builtin_mul_overflow(amount, p.unit_cost_cents, &cost) ||
        (p.validity_days && __builtin_mul_overflow(*p.validity_days, int64_t(86'400'000), &validity_ms)))
      throw Error(Exit::data, "prize '" + p.code + "': amount x unit cost or validity overflows 64 bits");
    const int64_t bucket = preferred_bucket(r.user, p.buckets);

    // 7. the grant (init) and its status log; the unique biz_id decides between concurrent twins
    g = GrantView{};
    g.record_code = new_id("R", now);
    const std::string why = degraded_from ? "draw degraded to consolation" : cat.kind == "lottery" ? "draw" : "claim";
    static const std::string kInsert =
        "INSERT INTO grants (record_code, biz_id, activity_id, prize_id, user_id, amount, cost_cents, state, bucket, "
        "draw_value, pool_version, degraded_from, channel, source, list_item_id, expires_at, created_at, updated_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, 'init', $8, $9, $10, $11, $12, $13, $14, $15, $16, $16) "
        "ON CONFLICT (biz_id) DO NOTHING RETURNING id";
    store::Params params{g.record_code, r.biz_id, activity_id, p.id, r.user, amount, cost, bucket, store::opt(draw_value),
                         cat.kind == "lottery" ? store::Value(version) : store::kNull,
                         degraded_from ? store::Value(degraded_from->id) : store::kNull, p.channel,
                         store::opt(r.source), store::opt(r.list_item_id),
                         p.validity_days ? store::Value(now + validity_ms) : store::kNull, now};
    if (tx.dialect() == store::Dialect::postgres) {
      // One round trip for the grant and its status-log row (a data-modifying CTE): fewer round
      // trips per claim is what keeps PostgreSQL's throughput close to the raw claim.
      params.insert(params.end(), {e.opts_.actor, why});
      auto ins = tx.query("WITH g AS (" + kInsert +
                              ") INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, "
                              "request_id, created_at) SELECT 'grant', g.id, NULL, 'init', $17, $18, NULL, $16 FROM g "
                              "RETURNING entity_id",
                          params);
      if (ins.empty()) throw TwinWon{};
      g.id = ins[0].i64(0);
    } else {
      auto ins = tx.query(kInsert, params);
      if (ins.empty()) throw TwinWon{};
      g.id = ins[0].i64(0);
      log_status(tx, {"grant", g.id, std::nullopt, "init", e.opts_.actor, why, std::nullopt}, now);
    }
    if (qual_id) log_status(tx, {"qualification", *qual_id, std::string("unused"), "used", e.opts_.actor, "claim " + g.record_code, std::nullopt}, now);

    // 8. budget, then stock: the hot rows, last
    if (cat.has_budget && cost > 0) {
      int64_t n = tx.exec(
          "UPDATE budget SET consumed_cents = consumed_cents + $2 WHERE activity_id = $1 "
          "AND consumed_cents + $2 <= authorised_cents",
          {activity_id, cost});
      if (n != 1) throw Rejection{"budget_exhausted"};
    }
    int64_t got = -1;
    for (int64_t k = 0; k < p.buckets && got < 0; ++k) {
      int64_t b = (bucket + k) % p.buckets;
      if (tx.exec("UPDATE stock SET remain = remain - 1 WHERE prize_id = $1 AND bucket = $2 AND remain > 0", {p.id, b}) == 1)
        got = b;
    }
    if (got < 0) {
      e.remember_sold_out(p.id);
      throw Rejection{"sold_out"};
    }
    if (got != bucket) tx.exec("UPDATE grants SET bucket = $1 WHERE id = $2", {got, g.id});

    g.biz_id = r.biz_id;
    g.activity = r.activity;
    g.prize = p.code;
    g.user = r.user;
    g.state = "init";
    g.item = p.item;
    g.item_kind = p.item_kind;
    g.channel = p.channel;
    g.amount = amount;
    g.cost_cents = cost;
    g.source = r.source;
    g.draw_value = draw_value;
    if (cat.kind == "lottery") g.pool_version = version;
    g.bucket = got;
    if (degraded_from) g.degraded_from = degraded_from->code;
    g.created_at = g.updated_at = now;
  }
};

ClaimOutcome Engine::claim(const ClaimRequest& r) {
  auto t0 = std::chrono::steady_clock::now();
  ClaimOutcome out;
  const Millis now = clock_.now_ms();
  auto finish = [&]() -> ClaimOutcome {
    out.duration_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info("claim activity={} user={} biz_id={} outcome={}{}{} duration_us={}", r.activity, r.user, r.biz_id,
                 status_name(out.status), out.reason.empty() ? "" : " reason=" + out.reason,
                 out.grant ? " record=" + out.grant->record_code + " state=" + out.grant->state : "", out.duration_us);
    return out;
  };
  // 1. idempotency first: a replay must never have a second effect, whatever else has changed.
  auto replay = [&](const GrantView& g) {
    if (g.user == r.user && g.activity == r.activity) {
      out.status = Status::replayed;
      out.grant = g;
    } else {
      out.status = Status::rejected;
      out.reason = "biz_id_conflict";
    }
  };
  bool twin = false;
  std::optional<GrantView> granted;
  try {
    st_.transact(store::TxMode::write, [&](store::Tx& tx) {
      twin = false;
      granted.reset();
      out.reason.clear();
      ClaimRun run{*this, r, tx, now, {}};
      try {
        run.run();
        granted = run.g;
        if (r.dry_run) tx.rollback_only();
      } catch (const Rejection& rej) {
        // On PostgreSQL a concurrent twin (same biz_id) that committed while we waited on its
        // limit or qualification row makes our conditional update fail: that is a replay, not a
        // rejection. A new statement sees the twin's commit.
        // Our own grant row (inserted before a later step failed) is not a twin.
        if (!tx.query("SELECT 1 FROM grants WHERE biz_id = $1 AND id <> $2", {r.biz_id, run.g.id}).empty()) {
          twin = true;
        } else {
          out.reason = rej.reason;
        }
        tx.rollback_only();
      } catch (const TwinWon&) {
        twin = true;
        tx.rollback_only();
      }
    });
  } catch (const store::UniqueViolation&) {
    twin = true;  // the unique key decided against us outside ON CONFLICT (e.g. record_code): treat as twin
  }
  if (twin) {
    auto g = find_grant_by_biz(st_.autocommit(), r.biz_id);
    if (!g) throw Error(Exit::temp_fail, "biz_id " + r.biz_id + " collided with a twin that is gone: try again");
    replay(*g);
    // A retry after a crash between the claim's commit and its delivery finishes the delivery.
    if (out.status == Status::replayed && g->state == "init" && r.deliver && !r.dry_run) deliver_after_commit(out);
    return finish();
  }
  if (!granted) {
    out.status = Status::rejected;
    return finish();
  }
  out.status = Status::granted;
  out.grant = granted;
  out.dry_run = r.dry_run;
  if (r.deliver && !r.dry_run) deliver_after_commit(out);
  return finish();
}

void Engine::deliver_after_commit(ClaimOutcome& out) {
  // The grant is committed: a delivery problem now is logged and left to the resend path; it
  // never turns the claim's answer into a failure.
  try {
    deliver(out.grant->id);
  } catch (const Error& e) {
    spdlog::warn("record={} committed but not delivered: {}", out.grant->record_code, e.what());
  }
  if (auto g = find_grant(st_.autocommit(), out.grant->record_code)) out.grant = g;
}

}  // namespace rc::engine
