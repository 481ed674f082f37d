// The one-statement claim (claim_one.hpp) and Engine::claim_in_one, which decides when it applies.
#include "core/engine/claim_one.hpp"

#include <spdlog/spdlog.h>

#include "core/engine/catalog.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/ledger.hpp"
#include "core/engine/limits.hpp"
#include "core/engine/stock.hpp"
#include "util/checked_math.hpp"
#include "util/hash.hpp"

namespace rc::engine {

std::optional<int64_t> claim_one_statement(store::Session& s, const OneStatementClaim& c, Millis now) {
  static const std::string kCall =
      "SELECT rewardctl_claim_one($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, "
      "$19, $20, $21, $22, $23, $24, $25, $26)";
  auto limit = [](const std::optional<LimitTake>& l) -> store::Params {
    if (!l) return {store::kNull, store::kNull, store::kNull};
    return {l->scope, l->period_key, l->limit};
  };
  store::Params p{c.activity_id, c.activity_code, c.version, now, c.user, c.biz_id, c.record_code, c.prize_id,
                  c.amount, c.cost_cents, c.bucket, c.channel, store::opt(c.source), store::opt(c.expires_at),
                  c.actor, c.why};
  for (auto& v : limit(c.activity_limit)) p.push_back(v);
  for (auto& v : limit(c.prize_limit)) p.push_back(v);
  p.insert(p.end(), {int64_t(c.take_budget ? 1 : 0), store::opt(c.bill_no), c.asset, c.bill_message});
  auto r = s.query(kCall, p);
  return r[0].opt_i64(0);
}

std::shared_ptr<const ActivityCatalog> Engine::cached_catalog(const std::string& code) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = catalogs_.find(code);
  return it == catalogs_.end() ? nullptr : it->second;
}

std::optional<GrantView> Engine::claim_in_one(const ClaimRequest& r, Millis now) {
  if (st_.dialect() != store::Dialect::postgres || !opts_.one_statement_claims || one_statement_off_ || r.dry_run ||
      r.list_item_id || r.retried_after_release)
    return std::nullopt;
  auto cat = cached_catalog(r.activity);
  if (!cat) {
    // The rules of the running version, read once per process (the full flow caches the same).
    st_.transact(store::TxMode::read, [&](store::Tx& tx) {
      auto a = tx.query("SELECT id, version FROM activity WHERE code = $1", {r.activity});
      cat = a.empty() ? nullptr : catalog(tx, r.activity, a[0].i64(0), a[0].i64(1));
    });
    if (!cat) return std::nullopt;
  }
  // only the common claim: a direct prize with fixed rules, delivered through the built-in ledger
  if (cat->kind != activity::Kind::direct || cat->whitelist_required || cat->has_ladder || cat->prizes.empty())
    return std::nullopt;
  const PrizeInfo* p = r.prize ? cat->prize(*r.prize) : &cat->prizes[0];
  if (!p || known_sold_out(p->id) || (cat->limit && *cat->limit <= 0) || (p->limit && *p->limit <= 0) ||
      !opts_.channels.count(p->channel))
    return std::nullopt;
  // Delivered here only through the built-in ledger; a remote channel (webhook) delivers after the
  // commit as in the full flow; any other channel in the database delivers in the full flow's
  // transaction, so it takes the full flow.
  bool ledger_now = false;
  if (r.deliver) {
    Channel* ch = channel(p->channel);
    if (!ch) return std::nullopt;
    ledger_now = ch->credits_ledger();
    if (!ledger_now && ch->in_database()) return std::nullopt;
  }
  auto cost = util::checked_mul(p->amount, p->unit_cost_cents);
  auto validity_ms = p->validity_days ? util::checked_mul(*p->validity_days, int64_t(86'400'000)) : int64_t(0);
  if (!cost || !validity_ms) return std::nullopt;

  OneStatementClaim c;
  c.activity_id = cat->id;
  c.activity_code = r.activity;
  c.version = cat->version;
  c.user = r.user;
  c.biz_id = r.biz_id;
  c.record_code = new_id("R", now);
  c.prize_id = p->id;
  c.amount = p->amount;
  c.cost_cents = *cost;
  c.bucket = preferred_bucket(r.user, p->buckets);
  c.channel = p->channel;
  c.source = r.source;
  if (p->validity_days) c.expires_at = now + *validity_ms;
  c.actor = opts_.actor;
  c.why = "claim";
  if (cat->limit)
    c.activity_limit = LimitTake{scope_activity(cat->id), period_key(cat->limit_period, now, cat->timezone), *cat->limit};
  if (p->limit) c.prize_limit = LimitTake{scope_prize(p->id), period_key(p->limit_period, now, cat->timezone), *p->limit};
  c.take_budget = cat->has_budget && *cost > 0;
  if (ledger_now) {
    c.bill_no = new_id("B", now);
    c.asset = ledger_asset(p->item_kind, p->item);
    c.bill_message = "credited " + c.asset;
  }

  std::optional<int64_t> id;
  try {
    id = claim_one_statement(st_.autocommit(), c, now);
  } catch (const store::Retryable&) {
    return std::nullopt;  // a deadlock or serialization failure: the full flow retries
  } catch (const store::UniqueViolation&) {
    return std::nullopt;  // a record code or bill number taken: the full flow answers
  } catch (const Error& e) {
    // The function cannot be called: a role without EXECUTE on it (42501), or a database restored
    // without it (42883). The statement wrote nothing; the full flow needs only the tables, so this
    // engine stops trying and says so once. Anything else is the full flow's to report too.
    if (e.kind() != Errc::not_permitted && e.kind() != Errc::internal) throw;
    if (!one_statement_off_.exchange(true))
      spdlog::warn("claims run the full flow: rewardctl_claim_one cannot be called ({}); grant the role EXECUTE "
                   "on it, or run `rewardctl db migrate`", e.what());
    return std::nullopt;
  }
  if (!id) return std::nullopt;

  // the grant as the full flow describes it after its delivery
  GrantView g;
  g.id = *id;
  g.record_code = c.record_code;
  g.biz_id = r.biz_id;
  g.activity = r.activity;
  g.prize = p->code;
  g.user = r.user;
  g.state = ledger_now ? GrantState::success : GrantState::init;
  g.item = p->item;
  g.item_kind = p->item_kind;
  g.channel = p->channel;
  g.amount = c.amount;
  g.cost_cents = c.cost_cents;
  g.source = r.source;
  g.pool_version = c.version;
  g.bill_no = c.bill_no;  // (none when not delivered here)
  g.bucket = c.bucket;
  g.created_at = g.updated_at = now;
  return g;
}

}  // namespace rc::engine
