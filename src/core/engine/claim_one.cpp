// The one-statement claims (claim_one.hpp): Engine::claim_in_one for one claim, and
// Engine::claim_chunk_in_one for a chunk of list-issue, with what decides when they apply.
#include "core/engine/claim_one.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/engine/catalog.hpp"
#include "core/engine/engine.hpp"
#include "core/engine/ledger.hpp"
#include "core/engine/limits.hpp"
#include "core/engine/prize_selection.hpp"
#include "core/engine/stock.hpp"
#include "util/checked_math.hpp"
#include "util/hash.hpp"

namespace rc::engine {

namespace {

store::Params limit_params(const std::optional<LimitTake>& l) {
  if (!l) return {store::kNull, store::kNull, store::kNull};
  return {l->scope, l->period_key, l->limit};
}

// The rules a claim of prize p follows, as the full flow computes them at `now`; nullopt when the
// cost or the validity overflows 64 bits (the full flow refuses that).
std::optional<OneStatementClaim> shared_rules(const ActivityCatalog& cat, const PrizeInfo& p, bool ledger_now,
                                              const std::string& actor, Millis now) {
  auto cost = util::checked_mul(p.amount, p.unit_cost_cents);
  auto validity_ms = p.validity_days ? util::checked_mul(*p.validity_days, int64_t(86'400'000)) : int64_t(0);
  if (!cost || !validity_ms) return std::nullopt;
  OneStatementClaim c;
  c.activity_id = cat.id;
  c.activity_code = cat.code;
  c.version = cat.version;
  c.prize_id = p.id;
  c.amount = p.amount;
  c.cost_cents = *cost;
  c.channel = p.channel;
  if (p.validity_days) c.expires_at = now + *validity_ms;
  c.actor = actor;
  c.why = "claim";
  if (cat.limit)
    c.activity_limit = LimitTake{scope_activity(cat.id), period_key(cat.limit_period, now, cat.timezone), *cat.limit};
  if (p.limit) c.prize_limit = LimitTake{scope_prize(p.id), period_key(p.limit_period, now, cat.timezone), *p.limit};
  c.take_budget = cat.has_budget && *cost > 0;
  if (ledger_now) {
    c.asset = ledger_asset(p.item_kind, p.item);
    c.bill_message = "credited " + c.asset;
  }
  return c;
}

// The grant a one-statement path wrote, as the full flow describes it after its delivery.
GrantView granted_view(const OneStatementClaim& c, const PrizeInfo& p, const ClaimRequest& r, int64_t id,
                       const std::string& record_code, const std::optional<std::string>& bill_no, int64_t bucket,
                       Millis now) {
  GrantView g;
  g.id = id;
  g.record_code = record_code;
  g.biz_id = r.biz_id;
  g.activity = r.activity;
  g.prize = p.code;
  g.user = r.user;
  g.state = bill_no ? GrantState::success : GrantState::init;
  g.item = p.item;
  g.item_kind = p.item_kind;
  g.channel = p.channel;
  g.amount = c.amount;
  g.cost_cents = c.cost_cents;
  g.source = r.source;
  g.pool_version = c.version;
  g.draw_value = c.draw_value;
  g.bill_no = bill_no;  // (none when not delivered here)
  g.bucket = bucket;
  g.created_at = g.updated_at = now;
  return g;
}

}  // namespace

std::optional<int64_t> claim_one_statement(store::Session& s, const OneStatementClaim& c, Millis now) {
  static const std::string kCall =
      "SELECT rewardctl_claim_one($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, "
      "$19, $20, $21, $22, $23, $24, $25, $26, $27)";
  store::Params p{c.activity_id, c.activity_code, c.version, now, c.user, c.biz_id, c.record_code, c.prize_id,
                  c.amount, c.cost_cents, c.bucket, c.channel, store::opt(c.source), store::opt(c.expires_at),
                  c.actor, c.why};
  for (auto& v : limit_params(c.activity_limit)) p.push_back(v);
  for (auto& v : limit_params(c.prize_limit)) p.push_back(v);
  p.insert(p.end(), {int64_t(c.take_budget ? 1 : 0), store::opt(c.bill_no), c.asset, c.bill_message,
                     store::opt(c.draw_value)});
  auto r = s.query(kCall, p);
  return r[0].opt_i64(0);
}

std::optional<std::vector<int64_t>> claim_chunk_statement(store::Session& s, const OneStatementChunk& c, Millis now) {
  static const std::string kCall =
      // the ids as rows in request order; none when it granted nothing (NULL unnests to no row)
      "SELECT t.id FROM unnest(rewardctl_claim_chunk($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, "
      "$16, $17, $18, $19, $20, CAST($21 AS JSONB))) WITH ORDINALITY AS t(id, i) ORDER BY t.i";
  const OneStatementClaim& sh = c.shared;
  // the items as JSON (escaped by the library, bound as one parameter)
  nlohmann::json items = nlohmann::json::array();
  int64_t i = 0;
  for (const auto& it : c.items) {
    nlohmann::json o{{"i", ++i}, {"u", it.user}, {"b", it.biz_id}, {"r", it.record_code}, {"k", it.bucket}};
    o["bill"] = it.bill_no ? nlohmann::json(*it.bill_no) : nlohmann::json();
    o["src"] = it.source ? nlohmann::json(*it.source) : nlohmann::json();
    o["item"] = it.list_item_id ? nlohmann::json(*it.list_item_id) : nlohmann::json();
    items.push_back(std::move(o));
  }
  const bool ledger = !sh.asset.empty();
  store::Params p{sh.activity_id, sh.activity_code, sh.version, now, sh.prize_id, sh.amount, sh.cost_cents,
                  sh.channel, store::opt(sh.expires_at), sh.actor, sh.why};
  for (auto& v : limit_params(sh.activity_limit)) p.push_back(v);
  for (auto& v : limit_params(sh.prize_limit)) p.push_back(v);
  p.push_back(store::opt(c.budget_cents));
  p.push_back(ledger ? store::Value(sh.asset) : store::kNull);
  p.push_back(ledger ? store::Value(sh.bill_message) : store::kNull);
  // Text that is not valid UTF-8 has no JSON form (and no place in a UTF8 database): nothing is
  // sent, and the full flow refuses it in its own words.
  try {
    p.push_back(items.dump());
  } catch (const nlohmann::json::type_error&) {
    return std::nullopt;
  }
  auto r = s.query(kCall, p);
  if (r.empty()) return std::nullopt;
  std::vector<int64_t> ids;
  ids.reserve(r.size());
  for (const auto& row : r.rows) ids.push_back(row.i64(0));
  if (ids.size() != c.items.size())
    throw Error(Errc::internal, "rewardctl_claim_chunk returned " + std::to_string(ids.size()) + " grant(s) for " +
                                    std::to_string(c.items.size()) + " request(s)");
  return ids;
}

std::shared_ptr<const ActivityCatalog> Engine::cached_catalog(const std::string& code) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = catalogs_.find(code);
  return it == catalogs_.end() ? nullptr : it->second;
}

bool Engine::one_statement_allowed(const ClaimRequest& r) const {
  return st_.dialect() == store::Dialect::postgres && opts_.one_statement_claims && !one_statement_off_ &&
         !r.dry_run;
}

std::shared_ptr<const ActivityCatalog> Engine::one_statement_catalog(store::Session& s, const std::string& activity) {
  if (auto cat = cached_catalog(activity)) return cat;
  // The rules of the running version, read once per process (the full flow caches the same).
  auto a = s.query("SELECT id, version FROM activity WHERE code = $1", {activity});
  return a.empty() ? nullptr : catalog(s, activity, a[0].i64(0), a[0].i64(1));
}

const PrizeInfo* Engine::one_statement_prize(const ActivityCatalog& cat, const ClaimRequest& r, bool& ledger_now,
                                             std::optional<ClaimRequest::Drawn>* drawn) {
  // only the common claims, with fixed rules: a direct prize; given `drawn`, also a red packet (its
  // amount drawn here) and a lottery's drawn prize - not with guaranteed draws, which count the
  // user's draws before drawing
  if (cat.whitelist_required || cat.has_ladder || cat.prizes.empty()) return nullptr;
  const Draw draw = [this](int64_t n) { return draw_below(n); };
  const PrizeInfo* p = nullptr;
  if (cat.kind == activity::Kind::direct || (cat.kind == activity::Kind::redpack && drawn)) {
    p = r.prize ? cat.prize(*r.prize) : &cat.prizes[0];
    if (p && cat.kind == activity::Kind::redpack && p->amount_max) {
      // drawn once, here: the full flow keeps this amount (and caps it by the budget left) when the
      // statement does not grant it - the statement grants it only when the budget covers it whole
      *drawn = ClaimRequest::Drawn{cat.version, redpack_amount(*p, r.drawn_under(cat.version), draw)};
      if ((*drawn)->value < 1) return nullptr;  // an empty packet: the full flow refuses it (grant_amount)
    } else if (p && cat.kind == activity::Kind::redpack && p->amount < 1) {
      return nullptr;
    }
  } else if (cat.kind == activity::Kind::lottery && drawn && cat.guarantees.empty() && cat.pool.total() > 0) {
    // drawn once, here: the full flow keeps this draw when the statement does not grant it
    *drawn = ClaimRequest::Drawn{cat.version, lottery_value(cat, r.drawn_under(cat.version), draw)};
    p = &cat.prizes[cat.pool.pick((*drawn)->value)];
  } else {
    return nullptr;
  }
  if (!p || known_sold_out(p->id) || (cat.limit && *cat.limit <= 0) || (p->limit && *p->limit <= 0) ||
      !opts_.channels.count(p->channel))
    return nullptr;
  // Delivered in the statement only through the built-in ledger; a remote channel (webhook)
  // delivers after the commit as in the full flow; any other channel in the database delivers in
  // the full flow's transaction, so it takes the full flow.
  ledger_now = false;
  if (r.deliver) {
    Channel* ch = channel(p->channel);
    if (!ch) return nullptr;
    ledger_now = ch->credits_ledger();
    if (!ledger_now && ch->in_database()) return nullptr;
  }
  return p;
}

// The function cannot be called: no privilege on it (42501), no such function (42883: dropped, or an
// older schema's signature) or more than one that fits (42725: an overload someone added); the store
// reports each with its SQLSTATE in the message. Any other error (a read-only connection, a bug of
// ours: a wrong parameter count) is raised: the full flow would meet it too, or it is ours to fix.
static bool cannot_call(const Error& e) {
  const std::string what = e.what();
  auto sqlstate = [&](const char* st) { return what.find(std::string("PostgreSQL error ") + st) != std::string::npos; };
  return (e.kind() == Errc::not_permitted && sqlstate("42501")) ||
         (e.kind() == Errc::internal && (sqlstate("42883") || sqlstate("42725")));
}

void Engine::one_statement_unavailable(const char* function, const Error& e) {
  // A role without EXECUTE on the function (42501), a database restored without it (42883), or an
  // overload that makes the call ambiguous (42725): cannot_call. The statement wrote nothing; the full flow needs only the tables, so this engine stops trying and
  // says so once. Anything else is the full flow's to report too.
  if (!one_statement_off_.exchange(true))
    spdlog::warn("claims and list-issue chunks run the full flow from now on: {} cannot be called ({}); grant "
                 "the role EXECUTE on rewardctl_claim_one and rewardctl_claim_chunk, or run `rewardctl db migrate`",
                 function, e.what());
}

std::optional<GrantView> Engine::claim_in_one(const ClaimRequest& r, Millis now,
                                              std::optional<ClaimRequest::Drawn>& drawn) {
  if (!one_statement_allowed(r) || r.list_item_id) return std::nullopt;
  auto cat = cached_catalog(r.activity);
  if (!cat) {
    st_.transact(store::TxMode::read, [&](store::Tx& tx) { cat = one_statement_catalog(tx, r.activity); });
    if (!cat) return std::nullopt;
  }
  bool ledger_now = false;
  const PrizeInfo* p = one_statement_prize(*cat, r, ledger_now, &drawn);
  if (!p) return std::nullopt;
  auto rules = shared_rules(*cat, *p, ledger_now, opts_.actor, now);
  if (!rules) return std::nullopt;
  OneStatementClaim& c = *rules;
  if (drawn && cat->kind == activity::Kind::lottery) {
    c.draw_value = drawn->value;
    c.why = "draw";
  } else if (drawn) {
    // a red packet's amount; the cost follows it (the budget's conditional take decides)
    auto cost = util::checked_mul(drawn->value, p->unit_cost_cents);
    if (!cost) return std::nullopt;
    c.amount = drawn->value;
    c.cost_cents = *cost;
    c.take_budget = cat->has_budget && *cost > 0;
  }
  c.activity_code = r.activity;
  c.user = r.user;
  c.biz_id = r.biz_id;
  c.record_code = new_id("R", now);
  c.bucket = preferred_bucket(r.user, p->buckets);
  c.source = r.source;
  if (ledger_now) c.bill_no = new_id("B", now);

  std::optional<int64_t> id;
  try {
    id = claim_one_statement(st_.autocommit(), c, now);
  } catch (const store::Retryable&) {
    return std::nullopt;  // a deadlock or serialization failure: the full flow retries
  } catch (const store::UniqueViolation&) {
    return std::nullopt;  // a record code or bill number taken: the full flow answers
  } catch (const Error& e) {
    if (!cannot_call(e)) throw;
    one_statement_unavailable("rewardctl_claim_one", e);
    return std::nullopt;
  }
  if (!id) return std::nullopt;
  return granted_view(c, *p, r, *id, c.record_code, c.bill_no, c.bucket, now);
}

std::optional<std::vector<ClaimOutcome>> Engine::claim_chunk_in_one(store::Tx& tx, const std::vector<ClaimRequest>& rs,
                                                                    Millis now) {
  if (rs.size() < 2) return std::nullopt;
  const ClaimRequest& first = rs.front();
  // one prize of one activity, each request for a different user under a different biz_id, all
  // delivered or none (a user twice would meet its own counter and account twice in one statement)
  std::set<std::string> users, bizs;
  for (const auto& r : rs) {
    if (!one_statement_allowed(r) || r.activity != first.activity || r.prize != first.prize ||
        r.deliver != first.deliver || !users.insert(r.user).second || !bizs.insert(r.biz_id).second)
      return std::nullopt;
    // text PostgreSQL cannot hold (a NUL byte): the full flow refuses it in its own words
    if (r.user.find('\0') != std::string::npos || r.biz_id.find('\0') != std::string::npos) return std::nullopt;
  }
  auto cat = one_statement_catalog(tx, first.activity);
  if (!cat) return std::nullopt;
  bool ledger_now = false;
  const PrizeInfo* p = one_statement_prize(*cat, first, ledger_now);
  if (!p) return std::nullopt;
  auto rules = shared_rules(*cat, *p, ledger_now, opts_.actor, now);
  if (!rules) return std::nullopt;
  OneStatementChunk c;
  c.shared = std::move(*rules);
  c.shared.activity_code = first.activity;
  if (c.shared.take_budget) {
    auto sum = util::checked_mul(c.shared.cost_cents, int64_t(rs.size()));
    if (!sum) return std::nullopt;  // past 64 bits: no budget covers it, the full flow answers each
    c.budget_cents = *sum;
  }
  c.items.reserve(rs.size());
  for (const auto& r : rs) {
    ChunkItem it;
    it.user = r.user;
    it.biz_id = r.biz_id;
    it.record_code = new_id("R", now);
    if (ledger_now) it.bill_no = new_id("B", now);
    it.source = r.source;
    it.list_item_id = r.list_item_id;
    it.bucket = preferred_bucket(r.user, p->buckets);
    c.items.push_back(std::move(it));
  }

  // Under a savepoint: a function that cannot be called aborts only its own statement.
  std::optional<std::vector<int64_t>> ids;
  tx.exec_script("SAVEPOINT claim_chunk_one");
  try {
    ids = claim_chunk_statement(tx, c, now);
  } catch (const Error& e) {
    if (!cannot_call(e)) throw;
    tx.exec_script("ROLLBACK TO SAVEPOINT claim_chunk_one; RELEASE SAVEPOINT claim_chunk_one");
    one_statement_unavailable("rewardctl_claim_chunk", e);
    return std::nullopt;
  }
  tx.exec_script("RELEASE SAVEPOINT claim_chunk_one");
  if (!ids) {
    remember_chunk_refused(first.activity);
    return std::nullopt;
  }

  std::vector<ClaimOutcome> outs(rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    const ChunkItem& it = c.items[i];
    outs[i].status = Status::granted;
    outs[i].grant = granted_view(c.shared, *p, rs[i], (*ids)[i], it.record_code, it.bill_no, it.bucket, now);
    spdlog::debug("claim activity={} user={} biz_id={} outcome=granted record={} (chunk of {})", rs[i].activity,
                  rs[i].user, rs[i].biz_id, it.record_code, rs.size());
  }
  return outs;
}

}  // namespace rc::engine
