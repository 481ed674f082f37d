// Live changes: user lists, stock and budget of a running activity (contract in live.hpp).
#include "core/activity/live.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "core/activity/versions.hpp"
#include "core/audit.hpp"
#include "base/error.hpp"
#include "core/interrupt.hpp"

namespace rc::activity::live {

using store::Lock;
using store::Session;
using store::Tx;
using nlohmann::json;

const char* user_list_name(UserList l) { return l == UserList::black ? "black" : "gray"; }

const char* change_kind_name(ChangeKind k) {
  switch (k) {
    case ChangeKind::stock_add: return "stock_add";
    case ChangeKind::stock_remove: return "stock_remove";
    case ChangeKind::budget_raise: return "budget_raise";
    case ChangeKind::budget_set: return "budget_set";
  }
  return "?";
}

namespace {

std::optional<ChangeKind> parse_kind(const std::string& s) {
  for (auto k : {ChangeKind::stock_add, ChangeKind::stock_remove, ChangeKind::budget_raise, ChangeKind::budget_set})
    if (s == change_kind_name(k)) return k;
  return std::nullopt;
}

bool is_stock(ChangeKind k) { return k == ChangeKind::stock_add || k == ChangeKind::stock_remove; }

// The prize a stock change is about.
struct PrizeRow {
  int64_t id = 0, buckets = 1, stock_total = 0, unit_cost_cents = 0;
  std::string item_kind;
};
// for_update: lock the prize row until the transaction ends (PostgreSQL; SQLite's write transaction
// holds the database), so that two changes of one prize apply one after the other.
PrizeRow get_prize(Session& s, int64_t activity_id, const std::string& code, const std::string& prize,
                   bool for_update = false) {
  auto r = s.query(
      "SELECT p.id, p.buckets, p.stock_total, i.unit_cost_cents, i.kind FROM prize p JOIN item i ON i.id = p.item_id "
      "WHERE p.activity_id = $1 AND p.code = $2" + (for_update ? s.lock_rows(Lock::update, "p") : std::string()),
      {activity_id, prize});
  if (r.empty()) throw Error(Errc::not_found, "activity " + code + " has no prize '" + prize + "' (see rewardctl activity show " + code + ")");
  return {r[0].i64(0), r[0].i64(1), r[0].i64(2), r[0].i64(3), r[0].str(4)};
}

struct BudgetRow {
  int64_t authorised = 0, consumed = 0;
};
BudgetRow get_budget(Session& s, int64_t activity_id, const std::string& code, bool for_update = false) {
  auto r = s.query("SELECT authorised_cents, consumed_cents FROM budget WHERE activity_id = $1" +
                       (for_update ? s.lock_rows(Lock::update) : std::string()),
                   {activity_id});
  if (r.empty())
    throw Error(Errc::conflict, "activity " + code + " has no budget: a new definition version adds one ([budget] total_cents)");
  return {r[0].i64(0), r[0].i64(1)};
}

// Money changes apply to an activity that runs: gray, live or paused. (Before that, `activity update`
// replaces its stock and budget; after it, nothing can be spent any more.)
ActivityRow running(Session& s, const std::string& code) {
  auto a = get(s, code);
  if (!is_running(a.state))
    throw Error(Errc::conflict, "activity " + code + " is " + name(a.state) + ": stock and budget change here only while it runs "
                                "(gray, live, paused); before that, activity update replaces them");
  return a;
}

// One stock bucket of a prize.
struct StockBucket {
  int64_t bucket = 0, total = 0, remain = 0;
};

// Applies the change in s. Returns (before, after): the prize's stock total, or the authorised budget.
// Throws Error(data) when a limit would be broken; nothing is changed then.
std::pair<int64_t, int64_t> apply(Session& s, const ActivityRow& a, ChangeKind kind, const std::string& prize,
                                  int64_t amount) {
  // Every value written below is computed from rows this transaction has locked: two concurrent
  // changes (or approvals) apply one after the other, never both from the same starting value.
  if (is_stock(kind)) {
    auto p = get_prize(s, a.id, a.code, prize, true);
    // Locked in bucket order, as a claim chunk takes them (sql/0013), so that a change and a chunk
    // never wait on each other's buckets crosswise; then taken in the order the change needs.
    std::vector<StockBucket> b;
    for (auto& row :
         s.query("SELECT bucket, total, remain FROM stock WHERE prize_id = $1 ORDER BY bucket" + s.lock_rows(Lock::update), {p.id}).rows)
      b.push_back({row.i64(0), row.i64(1), row.i64(2)});
    // add: the buckets with the least first, so that their totals end up even; remove: the fullest first
    std::stable_sort(b.begin(), b.end(), [&](const StockBucket& x, const StockBucket& y) {
      return kind == ChangeKind::stock_add ? x.total < y.total : x.remain > y.remain;
    });
    if (kind == ChangeKind::stock_add) {
      int64_t sum;
      if (__builtin_add_overflow(p.stock_total, amount, &sum))
        throw Error(Errc::bad_input, "prize " + prize + ": stock " + std::to_string(p.stock_total) + " + " +
                                         std::to_string(amount) + " does not fit in 64 bits");
      // spread evenly over the buckets, so that none runs dry long before the others
      const int64_t n = int64_t(b.size());
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k = amount / n + (i < amount % n ? 1 : 0);
        if (k == 0) continue;
        s.exec("UPDATE stock SET total = total + $3, remain = remain + $3 WHERE prize_id = $1 AND bucket = $2",
               {p.id, b[size_t(i)].bucket, k});
      }
    } else {
      int64_t left = 0;
      for (auto& x : b) left += x.remain;
      if (left < amount)
        throw Error(Errc::conflict, "prize " + prize + " has " + std::to_string(left) + " left: cannot remove " +
                                        std::to_string(amount) + " (stock is never removed below what is left); nothing changed");
      int64_t need = amount;
      for (auto& x : b) {
        const int64_t k = std::min(need, x.remain);
        if (k == 0) break;
        // conditional: a claim that took a unit since the read makes this bucket refuse, and the
        // transaction with it (PostgreSQL holds the rows locked; SQLite the database)
        if (s.exec("UPDATE stock SET total = total - $3, remain = remain - $3 WHERE prize_id = $1 AND bucket = $2 "
                   "AND remain >= $3",
                   {p.id, x.bucket, k}) != 1)
          throw store::Retryable("stock of prize " + prize + " changed while it was being removed");
        need -= k;
      }
    }
    const int64_t after = kind == ChangeKind::stock_add ? p.stock_total + amount : p.stock_total - amount;
    s.exec("UPDATE prize SET stock_total = $2 WHERE id = $1", {p.id, after});
    return {p.stock_total, after};
  }
  auto bud = get_budget(s, a.id, a.code, true);
  int64_t after = amount;
  if (kind == ChangeKind::budget_raise) {
    if (__builtin_add_overflow(bud.authorised, amount, &after))
      throw Error(Errc::bad_input, "budget of " + a.code + ": " + std::to_string(bud.authorised) + " + " +
                                       std::to_string(amount) + " cents does not fit in 64 bits");
  }
  // conditional on what is consumed now: a claim may have spent since the read
  if (s.exec("UPDATE budget SET authorised_cents = $2 WHERE activity_id = $1 AND consumed_cents <= $2", {a.id, after}) != 1) {
    auto now_b = get_budget(s, a.id, a.code);
    throw Error(Errc::conflict, "budget of " + a.code + ": " + std::to_string(now_b.consumed) + " cents are consumed, more than " +
                                    std::to_string(after) + ": a budget is never set below what is consumed; nothing changed");
  }
  return {bud.authorised, after};
}

// After a budget change: the ladder's thresholds follow the new authorised amount, and its step what
// the ratio now is (a raise that brings the ratio back under a threshold undoes that step, logged).
std::optional<LadderMove> settle(Session& s, const ActivityRow& a, ChangeKind kind, const Actor& who, Millis now) {
  if (is_stock(kind)) return std::nullopt;
  return settle_ladder(s, a.id, a.code, who.name, std::string("activity budget (") + change_kind_name(kind) + ")",
                               now);
}

std::string ladder_note(const Change& c) {
  if (!c.ladder) return "";
  return std::string("; budget ladder ") + ladder_step_name(c.ladder->from) + " -> " +
         ladder_step_name(c.ladder->to);
}

// The log line of a committed step move (a dry run moved nothing).
void announce(const Change& c) {
  if (!c.ladder || c.dry_run) return;
  if (c.ladder->up()) spdlog::warn("{}", describe(*c.ladder));
  else spdlog::info("{}", describe(*c.ladder));
}

const char* kChangeCols =
    "SELECT c.id, a.code, c.kind, c.prize_code, c.amount, c.state, c.reason, c.requested_by, c.decided_by, "
    "c.decision_reason, c.before_value, c.after_value, c.created_at, c.decided_at FROM change_request c JOIN activity a "
    "ON a.id = c.activity_id";

Change read_change(const store::Row& r) {
  Change c;
  c.id = r.i64(0);
  c.code = r.str(1);
  c.kind = r.str(2);
  c.prize = r.str_or(3, "");
  c.amount = r.i64(4);
  c.state = state_from_db<ChangeRequestState>(r.str(5));
  c.reason = r.str(6);
  c.requested_by = r.str(7);
  c.decided_by = r.opt_str(8);
  c.decision_reason = r.opt_str(9);
  c.before = r.opt_i64(10);
  c.after = r.opt_i64(11);
  c.created_at = r.i64(12);
  c.decided_at = r.opt_i64(13);
  return c;
}

Change get_change(Session& s, int64_t id) {
  auto r = s.query(std::string(kChangeCols) + " WHERE c.id = $1", {id});
  if (r.empty()) throw Error(Errc::not_found, "no change request " + std::to_string(id) + " (see rewardctl activity change list)");
  return read_change(r[0]);
}

std::string describe(const Change& c) {
  const bool stock = c.kind == "stock_add" || c.kind == "stock_remove";
  std::string what = c.kind == "stock_add"      ? "add " + std::to_string(c.amount) + " to the stock of " + c.prize
                     : c.kind == "stock_remove" ? "remove " + std::to_string(c.amount) + " from the stock of " + c.prize
                     : c.kind == "budget_raise" ? "raise the budget by " + std::to_string(c.amount) + " cents"
                                                : "set the budget to " + std::to_string(c.amount) + " cents";
  std::string s = "change " + (c.id ? std::to_string(c.id) : std::string("(new)")) + " of " + c.code + ": " + what;
  if (c.before && c.after)
    s += " (" + std::string(stock ? "stock " : "authorised ") + std::to_string(*c.before) + " -> " + std::to_string(*c.after) + ")";
  return s;
}

json audit_detail(const Change& c) {
  json j{{"change", c.id}, {"kind", c.kind}, {"amount", c.amount}, {"reason", c.reason}, {"state", c.state}};
  if (!c.prize.empty()) j["prize"] = c.prize;
  if (c.before) j["before"] = *c.before;
  if (c.after) j["after"] = *c.after;
  return j;
}

}  // namespace

ListChange change_user_list(store::Store& st, const std::string& code, UserList list, bool add,
                            const std::vector<std::string>& users, const Actor& who, Millis now) {
  ListChange r;
  r.code = code;
  r.list = user_list_name(list);
  r.op = add ? "add" : "remove";
  r.dry_run = who.dry_run;
  const std::set<std::string> distinct(users.begin(), users.end());
  r.requested = int64_t(distinct.size());
  st.transact(store::TxMode::write, [&](Tx& tx) {
    r.changed = 0;
    auto a = get(tx, code);
    int64_t n = 0;
    for (auto& u : distinct) {
      if ((++n & 1023) == 0) check_interrupted();  // a signal stops a huge list change, rolled back
      r.changed += add ? tx.exec("INSERT INTO activity_user_list (activity_id, list, user_id) VALUES ($1, $2, $3) "
                                 "ON CONFLICT DO NOTHING",
                                 {a.id, r.list, u})
                       : tx.exec("DELETE FROM activity_user_list WHERE activity_id = $1 AND list = $2 AND user_id = $3",
                                 {a.id, r.list, u});
    }
    json detail{{"list", r.list}, {"requested", r.requested}, {"changed", r.changed}};
    if (distinct.size() <= 20) detail["users"] = distinct;
    audit(tx, who.name, std::string("activity.") + (list == UserList::black ? "blacklist." : "gray.") + r.op, "activity",
          code, detail.dump(), now);
    if (who.dry_run) tx.rollback_only();
  });
  return r;
}

bool raises_spend(Session& s, const ChangeSpec& c, int64_t activity_id) {
  switch (c.kind) {
    case ChangeKind::stock_remove: return false;
    case ChangeKind::budget_raise: return true;
    case ChangeKind::budget_set: return c.amount > get_budget(s, activity_id, c.code).authorised;
    case ChangeKind::stock_add: {
      auto p = get_prize(s, activity_id, c.code, c.prize);
      return p.item_kind == "cash" || p.unit_cost_cents > 0;
    }
  }
  return true;
}

Change request(store::Store& st, const ChangeSpec& spec, bool review_required, const Actor& who, Millis now) {
  if (spec.reason.empty()) throw Error(Errc::usage, "--reason is required: every change to stock or budget says why");
  if (spec.amount < 0 || (spec.amount == 0 && spec.kind != ChangeKind::budget_set))
    throw Error(Errc::usage, "the amount must be a positive whole number, not " + std::to_string(spec.amount));
  Change c;
  st.transact(store::TxMode::write, [&](Tx& tx) {
    auto a = running(tx, spec.code);
    c = Change{};
    c.code = spec.code;
    c.kind = change_kind_name(spec.kind);
    c.prize = is_stock(spec.kind) ? spec.prize : "";
    c.amount = spec.amount;
    c.reason = spec.reason;
    c.requested_by = who.name;
    c.created_at = now;
    c.dry_run = who.dry_run;
    const bool needs_review = review_required && raises_spend(tx, spec, a.id);
    if (needs_review) {
      if (is_stock(spec.kind)) get_prize(tx, a.id, a.code, spec.prize);
      else get_budget(tx, a.id, a.code);
      c.state = ChangeRequestState::proposed;
    } else {
      auto [before, after] = apply(tx, a, spec.kind, spec.prize, spec.amount);
      c.before = before;
      c.after = after;
      c.ladder = settle(tx, a, spec.kind, who, now);
      c.state = ChangeRequestState::applied;
      c.decided_by = who.name;
      c.decided_at = now;
    }
    c.id = tx.query("INSERT INTO change_request (activity_id, kind, prize_code, amount, state, reason, requested_by, "
                    "decided_by, before_value, after_value, created_at, updated_at, decided_at) "
                    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12) RETURNING id",
                    {a.id, c.kind, c.prize.empty() ? store::kNull : store::Value(c.prize), c.amount, std::string(name(c.state)), c.reason,
                     c.requested_by, store::opt(c.decided_by), store::opt(c.before), store::opt(c.after), now,
                     store::opt(c.decided_at)})[0]
               .i64(0);
    log_created(tx, c.id, needs_review ? ChangeRequestState::proposed : ChangeRequestState::applied, who.name, c.reason,
                now);
    audit(tx, who.name, needs_review ? "activity.change.propose" : "activity.change.apply", "activity", c.code,
          audit_detail(c).dump(), now);
    if (who.dry_run) c.id = 0;  // rolled back: no id to approve
    c.message = needs_review ? describe(c) + ": proposed; it applies once another operator approves it" +
                                   (c.id ? " (rewardctl activity change approve " + std::to_string(c.id) + ")" : "")
                             : describe(c) + ": applied" + ladder_note(c);
    if (who.dry_run) tx.rollback_only();
  });
  announce(c);
  return c;
}

Change approve(store::Store& st, int64_t id, const Actor& who, Millis now) {
  Change c;
  st.transact(store::TxMode::write, [&](Tx& tx) {
    c = get_change(tx, id);
    c.dry_run = who.dry_run;
    if (c.state != ChangeRequestState::proposed)
      throw Error(Errc::refused, "change " + std::to_string(id) + " is " + name(c.state) + " (by " +
                                     c.decided_by.value_or("?") + "), not proposed: nothing to approve");
    if (c.requested_by == who.name)
      throw Error(Errc::not_permitted, "change " + std::to_string(id) + " was proposed by " + who.name +
                                           ": another operator approves it (money needs two people)");
    auto a = running(tx, c.code);
    auto kind = parse_kind(c.kind);
    if (!kind) throw Error(Errc::internal, "change " + std::to_string(id) + " has an unknown kind " + c.kind);
    auto [before, after] = apply(tx, a, *kind, c.prize, c.amount);
    c.before = before;
    c.after = after;
    c.ladder = settle(tx, a, *kind, who, now);
    if (!transition(tx, id, ChangeRequestState::proposed, ChangeRequestState::applied, who.name, std::nullopt, now,
                    ", decided_by = $5, decided_at = $2, before_value = $6, after_value = $7", {who.name, before, after}))
      throw store::Retryable("change " + std::to_string(id) + " was decided concurrently");
    c.state = ChangeRequestState::applied;
    c.decided_by = who.name;
    c.decided_at = now;
    audit(tx, who.name, "activity.change.approve", "activity", c.code, audit_detail(c).dump(), now);
    c.message = describe(c) + ": approved by " + who.name + " and applied" + ladder_note(c);
    if (who.dry_run) tx.rollback_only();
  });
  announce(c);
  return c;
}

Change reject(store::Store& st, int64_t id, const std::string& reason, const Actor& who, Millis now) {
  if (reason.empty()) throw Error(Errc::usage, "--reason is required to reject a change");
  Change c;
  st.transact(store::TxMode::write, [&](Tx& tx) {
    c = get_change(tx, id);
    c.dry_run = who.dry_run;
    if (c.state != ChangeRequestState::proposed)
      throw Error(Errc::refused, "change " + std::to_string(id) + " is " + name(c.state) + ", not proposed: nothing to reject");
    if (!transition(tx, id, ChangeRequestState::proposed, ChangeRequestState::rejected, who.name, reason, now,
                    ", decided_by = $5, decided_at = $2, decision_reason = $6", {who.name, reason}))
      throw store::Retryable("change " + std::to_string(id) + " was decided concurrently");
    c.state = ChangeRequestState::rejected;
    c.decided_by = who.name;
    c.decision_reason = reason;
    c.decided_at = now;
    audit(tx, who.name, "activity.change.reject", "activity", c.code, audit_detail(c).dump(), now);
    c.message = describe(c) + ": rejected by " + who.name;
    if (who.dry_run) tx.rollback_only();
  });
  return c;
}

std::vector<Change> list(store::Store& st, const std::optional<std::string>& code,
                         const std::optional<std::string>& state) {
  if (code) id_of(st, *code);  // an unknown activity is an error, not an empty list
  auto r = st.query(std::string(kChangeCols) +
                        " WHERE ($1 = '' OR a.code = $1) AND ($2 = '' OR c.state = $2) ORDER BY c.id DESC",
                    {code.value_or(""), state.value_or("")});
  std::vector<Change> out;
  for (auto& row : r.rows) out.push_back(read_change(row));
  return out;
}

}  // namespace rc::activity::live
