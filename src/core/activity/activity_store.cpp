// Writing definitions: create and update. The definition text and its SHA-256 are kept so that an
// approval can be tied to exactly the text that was reviewed.
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/activity/activity.hpp"
#include "core/activity/children.hpp"
#include "core/activity/versions.hpp"
#include "core/audit.hpp"
#include "core/budget_ladder.hpp"
#include "util/hash.hpp"

namespace rc::activity {

using store::kNull;
using store::Params;
using store::Session;

static const char* kSelect =
    "SELECT id, code, name, kind, state, timezone, definition_hash, created_by, version, start_at, end_at, "
    "created_at, updated_at, whitelist_required, user_limit, user_limit_period, definition FROM activity ";

static ActivityRow to_row(const store::Row& r) {
  ActivityRow a;
  a.id = r.i64(0);
  a.code = r.str(1);
  a.name = r.str(2);
  a.kind = state_from_db<Kind>(r.str(3));
  a.state = state_from_db<ActivityState>(r.str(4));
  a.timezone = r.str(5);
  a.definition_hash = r.str(6);
  a.created_by = r.str(7);
  a.version = r.i64(8);
  a.start_at = r.i64(9);
  a.end_at = r.i64(10);
  a.created_at = r.i64(11);
  a.updated_at = r.i64(12);
  a.whitelist_required = r.i64(13) != 0;
  a.user_limit = r.opt_i64(14);
  a.user_limit_period = r.opt_str(15);
  a.definition = r.str(16);
  return a;
}

std::optional<ActivityRow> find(Session& s, const std::string& code) {
  // no stored activity has another code; a name that is not even UTF-8 never reaches PostgreSQL
  if (!valid_code(code)) return std::nullopt;
  auto r = s.query(std::string(kSelect) + "WHERE code = $1", {code});
  if (r.empty()) return std::nullopt;
  return to_row(r[0]);
}

ActivityRow get(Session& s, const std::string& code) {
  auto a = find(s, code);
  if (!a) throw Error(Errc::not_found, "no activity '" + code + "' (see rewardctl activity list)");
  return *a;
}

int64_t id_of(store::Store& st, const std::string& code) {
  auto r = valid_code(code) ? st.query("SELECT id FROM activity WHERE code = $1", {code}) : store::Result{};
  if (r.empty()) throw Error(Errc::not_found, "no activity '" + code + "' (see rewardctl activity list)");
  return r[0].i64(0);
}

bool is_final(ActivityState state) {
  return state == ActivityState::ended || state == ActivityState::offline || state == ActivityState::rejected;
}

int64_t insert_item(Session& s, int64_t activity_id, const ItemDef& it) {
  return s
      .query("INSERT INTO item (activity_id, code, kind, unit_cost_cents, channel) VALUES ($1, $2, $3, $4, $5) "
             "RETURNING id",
             {activity_id, it.code, it.kind, it.unit_cost_cents, it.channel})[0]
      .i64(0);
}

store::Params prize_params(const Definition& d, const PrizeDef& p, int64_t item_id) {
  const bool consolation = d.consolation && *d.consolation == p.code;
  return {item_id, p.amount, store::opt(p.amount_max), p.limit ? store::Value(p.limit->count) : kNull,
          p.limit ? store::Value(std::string(period_name(p.limit->period))) : kNull, p.weight,
          int64_t(consolation ? 1 : 0), store::opt(p.validity_days), int64_t(&p - d.prizes.data()),
          int64_t(p.high_value ? 1 : 0)};
}

int64_t insert_prize(Session& s, int64_t activity_id, const Definition& d, const PrizeDef& p, int64_t item_id) {
  store::Params params{activity_id, p.code, p.stock, p.stock_buckets};
  auto rest = prize_params(d, p, item_id);
  params.insert(params.end(), rest.begin(), rest.end());
  const int64_t pid = s.query("INSERT INTO prize (activity_id, code, stock_total, buckets, item_id, amount, amount_max, "
                              "user_limit, user_limit_period, weight, consolation, validity_days, position, high_value) "
                              "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id",
                              params)[0]
                          .i64(0);
  // Stock is spread evenly over the buckets; the first (stock % buckets) get one more.
  const int64_t n = std::max<int64_t>(1, p.stock_buckets);
  for (int64_t b = 0; b < n; ++b) {
    const int64_t share = p.stock / n + (b < p.stock % n ? 1 : 0);
    s.exec("INSERT INTO stock (prize_id, bucket, total, remain) VALUES ($1, $2, $3, $3)", {pid, b, share});
  }
  return pid;
}

void add_listed_users(Session& s, int64_t activity_id, const Definition& d) {
  for (const auto* l : {&d.gray_users, &d.blacklist})
    for (const auto& u : *l)
      s.exec("INSERT INTO activity_user_list (activity_id, list, user_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
             {activity_id, std::string(l == &d.gray_users ? "gray" : "black"), u});
}

store::Params fuse_params(const FuseDef& f, int64_t prize_id) {
  return {prize_id ? store::Value(prize_id) : kNull, f.window_seconds, store::opt(f.max_count),
          store::opt(f.max_amount_cents), store::opt(f.pop_percent), store::opt(f.dod_percent), f.min_count};
}

void insert_fuse_rule(Session& s, int64_t activity_id, const FuseDef& f, int64_t prize_id) {
  store::Params params{activity_id, f.name};
  auto rest = fuse_params(f, prize_id);
  params.insert(params.end(), rest.begin(), rest.end());
  s.exec("INSERT INTO fuse_rule (activity_id, name, prize_id, window_seconds, max_count, max_amount_cents, "
         "pop_percent, dod_percent, min_count) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
         params);
}

namespace {

// Inserts everything a definition implies below the activity row: items, prizes, stock buckets,
// budget, gray list and blacklist, fuse rules.
void write_children(Session& s, int64_t activity_id, const Definition& d) {
  std::map<std::string, int64_t> item_ids, prize_ids;
  for (const auto& it : d.items) item_ids[it.code] = insert_item(s, activity_id, it);
  for (const auto& p : d.prizes) prize_ids[p.code] = insert_prize(s, activity_id, d, p, item_ids.at(p.item));
  if (d.budget_cents) {
    // the ladder's ratios, and the thresholds in cents they give for this budget (budget_ladder.hpp)
    const LadderRatios r{d.ladder.warn_ppm, d.ladder.degrade_ppm, d.ladder.stop_ppm};
    const LadderCents c = thresholds(*d.budget_cents, r);
    s.exec("INSERT INTO budget (activity_id, authorised_cents, consumed_cents, warn_ppm, degrade_ppm, stop_ppm, "
           "warn_cents, degrade_cents, stop_cents, ladder_step) VALUES ($1, $2, 0, $3, $4, $5, $6, $7, $8, $9)",
           {activity_id, *d.budget_cents, store::opt(r.warn), store::opt(r.degrade), store::opt(r.stop),
            store::opt(c.warn), store::opt(c.degrade), store::opt(c.stop),
            std::string(ladder_step_name(step_for(0, c)))});
  }
  add_listed_users(s, activity_id, d);
  for (const auto& f : d.fuses) insert_fuse_rule(s, activity_id, f, f.prize ? prize_ids.at(*f.prize) : 0);
}

void delete_children(Session& s, int64_t activity_id) {
  s.exec("DELETE FROM fuse_rule WHERE activity_id = $1", {activity_id});
  s.exec("DELETE FROM stock WHERE prize_id IN (SELECT id FROM prize WHERE activity_id = $1)", {activity_id});
  s.exec("DELETE FROM prize WHERE activity_id = $1", {activity_id});
  s.exec("DELETE FROM item WHERE activity_id = $1", {activity_id});
  s.exec("DELETE FROM budget WHERE activity_id = $1", {activity_id});
  s.exec("DELETE FROM activity_user_list WHERE activity_id = $1", {activity_id});
}

Params header_params(const Definition& d) {
  return {d.name,
          kind_name(d.kind),
          d.timezone,
          d.start_at,
          d.end_at,
          int64_t(d.whitelist_required ? 1 : 0),
          d.limit ? store::Value(d.limit->count) : kNull,
          d.limit ? store::Value(std::string(period_name(d.limit->period))) : kNull};
}

std::string summary_json(const Definition& d, const std::string& hash, const std::string& extra_key = "",
                         const std::string& extra_val = "") {
  nlohmann::json j{{"hash", hash}, {"kind", kind_name(d.kind)}, {"prizes", d.prizes.size()}};
  if (!extra_key.empty()) j[extra_key] = extra_val;
  return j.dump();
}

}  // namespace

CreateResult create(store::Store& st, const Definition& d, const std::string& text, const CreateOptions& opts,
                    const Actor& who, Millis now) {
  if (opts.publish && opts.review_required)
    throw Error(Errc::not_permitted, "create --publish skips the two-role review: allowed only with review.required = false");
  CreateResult res;
  res.code = d.code;
  res.hash = sha256_hex(text);
  res.dry_run = who.dry_run;
  res.state = name(opts.publish ? ActivityState::live : ActivityState::pending_review);
  try {
    st.transact(store::TxMode::write, [&](store::Tx& tx) {
      res.log.clear();
      if (find(tx, d.code)) throw Error(Errc::conflict, "activity '" + d.code + "' already exists: use activity update");
      Params p{d.code};
      auto hp = header_params(d);
      p.insert(p.end(), hp.begin(), hp.end());
      p.insert(p.end(), {name(ActivityState::pending_review), text, res.hash, who.name, now});
      auto r = tx.query(
          "INSERT INTO activity (code, name, kind, timezone, start_at, end_at, whitelist_required, user_limit, "
          "user_limit_period, state, definition, definition_hash, created_by, created_at, updated_at, version) "
          "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, 1) RETURNING id",
          p);
      res.id = r[0].i64(0);
      log_created(tx, res.id, ActivityState::pending_review, who.name, "created", now);
      write_children(tx, res.id, d);
      record_current(tx, res.id, 1, text, res.hash, who.name, "created", now);
      res.version = 1;
      res.version_state = name(VersionState::current);
      audit(tx, who.name, "activity.create", "activity", d.code, summary_json(d, res.hash), now);
      res.log.push_back("created " + d.code + " (pending_review), " + std::to_string(d.prizes.size()) + " prize(s)");
      if (opts.publish) {
        const std::string waived = "review waived: review.required = false";
        transition(tx, res.id, ActivityState::pending_review, ActivityState::approved, who.name, waived, now);
        transition(tx, res.id, ActivityState::approved, ActivityState::live, who.name,
                   "published with create --publish", now);
        audit(tx, who.name, "activity.review_waived", "activity", d.code,
              nlohmann::json{{"reason", waived}, {"hash", res.hash}}.dump(), now);
        res.log.push_back(waived + "; published: live");
      }
      if (who.dry_run) tx.rollback_only();
    });
  } catch (const store::UniqueViolation&) {
    // a concurrent create of the same code committed first
    throw Error(Errc::conflict, "activity '" + d.code + "' already exists: use activity update");
  }
  if (who.dry_run) res.id = 0;
  return res;
}

CreateResult update(store::Store& st, const Definition& d, const std::string& text, const Actor& who, Millis now,
                    const CreateOptions& opts) {
  {
    std::optional<ActivityRow> a;
    st.transact(store::TxMode::read, [&](store::Tx& tx) { a = find(tx, d.code); });
    if (a && is_running(a->state)) return propose(st, d, text, {opts.publish, opts.review_required}, who, now);
  }
  CreateResult res;
  res.code = d.code;
  res.hash = sha256_hex(text);
  res.dry_run = who.dry_run;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    res.log.clear();
    auto a = get(tx, d.code);
    res.id = a.id;
    res.state = name(a.state);
    using S = ActivityState;
    const bool editable =
        a.state == S::pending_review || a.state == S::product_approved || a.state == S::approved || a.state == S::rejected;
    if (!editable)
      throw Error(Errc::refused, "activity '" + d.code + "' is " + res.state +
                                     (is_running(a.state) ? " (it started running meanwhile): run activity update again"
                                                          : ": an activity that has ended or is offline cannot change"));
    if (a.definition_hash == res.hash) {
      res.log.push_back("definition unchanged (same SHA-256): nothing to do");
      tx.rollback_only();
      return;
    }
    Params p = header_params(d);
    p.insert(p.end(), {text, res.hash, now, a.id, name(a.state)});
    int64_t n = tx.exec(
        "UPDATE activity SET name = $1, kind = $2, timezone = $3, start_at = $4, end_at = $5, whitelist_required = $6, "
        "user_limit = $7, user_limit_period = $8, definition = $9, definition_hash = $10, updated_at = $11, "
        "version = version + 1 WHERE id = $12 AND state = $13",
        p);
    if (n != 1) throw Error(Errc::busy, "activity '" + d.code + "' changed concurrently: try again");
    delete_children(tx, a.id);
    write_children(tx, a.id, d);
    record_current(tx, a.id, a.version + 1, text, res.hash, who.name, "definition changed before publishing", now);
    res.version = a.version + 1;
    res.version_state = name(VersionState::current);
    int64_t voided = tx.exec("UPDATE activity_review SET voided = 1 WHERE activity_id = $1 AND voided = 0", {a.id});
    if (a.state != S::pending_review) {
      transition(tx, a.id, a.state, S::pending_review, who.name, "definition changed: approvals voided", now);
      res.state = name(S::pending_review);
    }
    audit(tx, who.name, "activity.update", "activity", d.code,
          summary_json(d, res.hash, "previous_hash", a.definition_hash), now);
    res.log.push_back("stored version " + std::to_string(a.version + 1) + " of " + d.code + "; " +
                      std::to_string(voided) + " review decision(s) voided; state pending_review");
    if (who.dry_run) tx.rollback_only();
  });
  return res;
}

}  // namespace rc::activity
