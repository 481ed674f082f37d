// list-issue batches: the state machine an operator drives (approve, cancel) and the read side
// (status, list, items).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "core/audit.hpp"
#include "util/hash.hpp"
#include "jobs/list_issue/list_issue.hpp"
#include "jobs/list_issue/internal.hpp"

namespace rc::jobs::list_issue {

namespace {

const char* kBatchSelect =
    "SELECT b.id, b.activity_id, b.prize_id, b.total, b.cost_cents, b.rejected, b.batch_no, a.code, p.code, b.state, "
    "b.file_name, b.file_sha256, b.definition_hash, b.created_by, b.approved_by, b.approved_fingerprint, "
    "b.last_error, b.fits, b.created_at, b.updated_at "
    "FROM list_batch b JOIN activity a ON a.id = b.activity_id JOIN prize p ON p.id = b.prize_id ";

BatchRow to_batch(const store::Row& r) {
  BatchRow b;
  b.id = r.i64(0);
  b.activity_id = r.i64(1);
  b.prize_id = r.i64(2);
  b.total = r.i64(3);
  b.cost_cents = r.i64(4);
  b.rejected = r.i64(5);
  b.batch_no = r.str(6);
  b.activity = r.str(7);
  b.prize = r.str(8);
  b.state = state_from_db<ListBatchState>(r.str(9));
  b.file_name = r.str(10);
  b.file_sha256 = r.str(11);
  b.definition_hash = r.str(12);
  b.created_by = r.str(13);
  b.approved_by = r.opt_str(14);
  b.approved_fingerprint = r.opt_str(15);
  b.last_error = r.opt_str(16);
  b.fits = r.i64(17) != 0;
  b.created_at = r.i64(18);
  b.updated_at = r.i64(19);
  return b;
}

Status to_status(const BatchRow& b) {
  Status s;
  s.batch_no = b.batch_no;
  s.activity = b.activity;
  s.prize = b.prize;
  s.state = name(b.state);
  s.file_name = b.file_name;
  s.file_sha256 = b.file_sha256;
  s.definition_hash = b.definition_hash;
  s.created_by = b.created_by;
  s.approved_by = b.approved_by;
  s.last_error = b.last_error;
  s.total = b.total;
  s.cost_cents = b.cost_cents;
  s.rejected_rows = b.rejected;
  s.created_at = b.created_at;
  s.updated_at = b.updated_at;
  return s;
}

}  // namespace

std::optional<BatchRow> find_batch(store::Session& s, const std::string& batch_no, bool for_update) {
  std::string sql = std::string(kBatchSelect) + "WHERE b.batch_no = $1";
  if (for_update) sql += s.lock_rows(store::Lock::update, "b");
  auto r = s.query(sql, {batch_no});
  if (r.empty()) return std::nullopt;
  return to_batch(r[0]);
}

BatchRow get_batch(store::Session& s, const std::string& batch_no, bool for_update) {
  auto b = find_batch(s, batch_no, for_update);
  if (!b) throw Error(Errc::not_found, "no list-issue batch '" + batch_no + "' (see rewardctl list-issue list)");
  return *b;
}

std::string fingerprint(const BatchRow& b) {
  return sha256_hex(b.batch_no + "\n" + std::to_string(b.activity_id) + "\n" + std::to_string(b.prize_id) + "\n" +
                    b.file_sha256 + "\n" + b.definition_hash + "\n" + std::to_string(b.total) + "\n" +
                    std::to_string(b.cost_cents) + "\n" + b.created_by);
}

bool move_batch(store::Session& s, const BatchRow& b, ListBatchState from, ListBatchState to,
                const std::string& actor, const std::optional<std::string>& reason, Millis now,
                const std::string& extra_set, const store::Params& extra) {
  return transition(s, b.id, from, to, actor, reason, now, extra_set, extra);
}

Change approve(store::Store& st, const std::string& batch_no, const std::string& approver, Millis now, bool dry_run) {
  Change c;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    c = Change{};
    c.batch_no = batch_no;
    c.dry_run = dry_run;
    auto b = get_batch(tx, batch_no, true);
    c.from = name(b.state);
    // Four eyes: the person who planned the list may not also release it.
    if (approver == b.created_by)
      throw Error(Errc::not_permitted, "batch " + batch_no + " was planned by " + b.created_by +
                                           ": another operator must approve it (--operator)");
    if (b.state != ListBatchState::planned) {
      c.to = c.from;
      c.message = "batch " + batch_no + " is " + c.from + ": only a planned batch can be approved; nothing changed";
      tx.rollback_only();
      return;
    }
    c.to = name(ListBatchState::approved);
    c.changed = move_batch(tx, b, ListBatchState::planned, ListBatchState::approved, approver, "approved", now,
                           ", approved_by = $5, approved_at = $6, approved_fingerprint = $7",
                           {approver, now, fingerprint(b)});
    if (!c.changed) throw Error(Errc::busy, "batch " + batch_no + " changed concurrently: try again");
    nlohmann::json d = {{"batch", batch_no}, {"users", b.total}, {"cost_cents", b.cost_cents},
                        {"definition_hash", b.definition_hash}, {"sha256", b.file_sha256}};
    audit(tx, approver, "list_issue.approve", "list_batch", batch_no, d.dump(), now);
    c.message = (dry_run ? "would approve batch " : "approved batch ") + batch_no + " (" + std::to_string(b.total) +
                " users, " + std::to_string(b.cost_cents) + " cents)";
    if (dry_run) tx.rollback_only();
  });
  return c;
}

namespace {

// A held item of a batch and the pending grant that waits with it on a fuse.
struct HeldItem {
  int64_t item_id = 0, grant_id = 0;
};
std::vector<HeldItem> held_items(store::Tx& tx, int64_t batch_id) {
  std::vector<HeldItem> out;
  for (auto& r : tx.query("SELECT li.id, g.id FROM list_item li JOIN grants g ON g.record_code = li.record_code "
                          "WHERE li.batch_id = $1 AND li.state = 'held' ORDER BY li.id",
                          {batch_id})
                     .rows)
    out.push_back({r.i64(0), r.i64(1)});
  return out;
}

// How many items of the batch are in each state (states without items are absent).
std::vector<std::pair<ListItemState, int64_t>> item_counts(store::Tx& tx, int64_t batch_id) {
  std::vector<std::pair<ListItemState, int64_t>> out;
  for (auto& r : tx.query("SELECT state, COUNT(*) FROM list_item WHERE batch_id = $1 GROUP BY state", {batch_id}).rows)
    out.emplace_back(state_from_db<ListItemState>(r.str(0)), r.i64(1));
  return out;
}

// The items of the batch finished (issued, rejected, failed) after `since`, and the first such update.
struct Finished {
  int64_t items = 0;
  std::optional<Millis> first_at;  // none when items is 0
};
Finished finished_since(store::Tx& tx, int64_t batch_id, Millis since) {
  auto r = tx.query(
      "SELECT COUNT(*), MIN(updated_at) FROM list_item WHERE batch_id = $1 AND state IN ('issued', 'rejected', "
      "'failed') AND updated_at > $2",
      {batch_id, since});
  return {r[0].i64(0), r[0].opt_i64(1)};
}

Item to_item(const store::Row& r) {
  return {r.i64(0),
          r.i64(1),
          r.str(2),
          state_from_db<ListItemState>(r.str(3)),
          r.opt_str(4),
          r.opt_str(5),
          r.opt_str(6),
          r.i64(7)};
}

}  // namespace

Change cancel(store::Store& st, const std::string& batch_no, const std::string& op,
              const std::optional<std::string>& reason, Millis now, bool dry_run) {
  Change c;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    c = Change{};
    c.batch_no = batch_no;
    c.dry_run = dry_run;
    auto b = get_batch(tx, batch_no, true);
    c.from = c.to = name(b.state);
    using B = ListBatchState;
    if (b.state != B::planned && b.state != B::approved && b.state != B::running) {
      c.message = "batch " + batch_no + " is " + c.from + ": nothing to cancel";
      tx.rollback_only();
      return;
    }
    c.to = name(B::cancelled);
    const std::string why = reason.value_or("cancelled");
    if (!move_batch(tx, b, b.state, B::cancelled, op, why, now))
      throw Error(Errc::busy, "batch " + batch_no + " changed concurrently: try again");
    // Every pending item: one conditional update and one status-log row each, set-based. The
    // update decides (items a running chunk holds are skipped once it commits them as issued).
    if (tx.dialect() == store::Dialect::postgres) {
      c.items = tx.query(
                     "WITH c AS (UPDATE list_item SET state = 'cancelled', updated_at = $2 WHERE batch_id = $1 "
                     "AND state = 'pending' RETURNING id) " + kStatusLogInsert +
                     "SELECT 'list_item', id, 'pending', 'cancelled', $3, $4, NULL, $2 FROM c",
                     {b.id, now, op, why})
                    .affected;
    } else {
      // SQLite: the write lock is held since BEGIN IMMEDIATE, so the pending set cannot change between
      // the two statements.
      tx.exec("INSERT INTO status_log (entity, entity_id, from_state, to_state, actor, reason, created_at) "
              "SELECT 'list_item', id, 'pending', 'cancelled', $3, $4, $2 FROM list_item WHERE batch_id = $1 "
              "AND state = 'pending'",
              {b.id, now, op, why});
      c.items = tx.exec("UPDATE list_item SET state = 'cancelled', updated_at = $2 WHERE batch_id = $1 AND state = 'pending'",
                        {b.id, now});
    }
    // Items waiting on a fuse: the held grant and the item are cancelled together, each with its
    // conditional update and log row. A grant a release moved first is followed by its item there.
    for (auto& h : held_items(tx, b.id))
      if (transition(tx, h.grant_id, GrantState::pending, GrantState::cancelled, op, "list batch cancelled: " + why,
                     now, ", reason = $5", {std::string("list_batch_cancelled")}) &&
          transition(tx, h.item_id, ListItemState::held, ListItemState::cancelled, op, why, now))
        ++c.items;
    nlohmann::json d = {{"batch", batch_no}, {"from", b.state}, {"items_cancelled", c.items}, {"reason", why}};
    audit(tx, op, "list_issue.cancel", "list_batch", batch_no, d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), now);
    c.changed = true;
    c.message = (dry_run ? "would cancel batch " : "cancelled batch ") + batch_no + " (" + std::to_string(c.items) +
                " pending or held items)";
    if (dry_run) tx.rollback_only();
  });
  return c;
}

Status status(store::Store& st, const std::string& batch_no, Millis now) {
  Status s;
  st.transact(store::TxMode::read, [&](store::Tx& tx) {
    auto b = get_batch(tx, batch_no);
    s = to_status(b);
    for (auto& [state, n] : item_counts(tx, b.id)) {
      switch (state) {
        case ListItemState::pending: s.pending = n; break;
        case ListItemState::held: s.held = n; break;
        case ListItemState::issued: s.issued = n; break;
        case ListItemState::rejected: s.rejected = n; break;
        case ListItemState::failed: s.failed = n; break;
        case ListItemState::cancelled: s.cancelled = n; break;
      }
    }
    // Rate over the last minute of finished items; the ETA follows from it.
    const Finished recent = finished_since(tx, b.id, now - 60'000);
    if (recent.items > 0) {
      double span = std::max(1.0, double(now - *recent.first_at) / 1000.0);
      s.rate_per_s = double(recent.items) / span;
      if (s.pending > 0 && b.state == ListBatchState::running)
        s.eta_s = int64_t(std::ceil(double(s.pending) / s.rate_per_s));
    }
    if (!s.last_error) {
      auto e = tx.query("SELECT error FROM list_item WHERE batch_id = $1 AND state = 'failed' ORDER BY updated_at DESC, "
                        "id DESC LIMIT 1",
                        {b.id});
      if (!e.empty()) s.last_error = e[0].opt_str(0);
    }
  });
  return s;
}

std::vector<Status> list(store::Store& st, const std::optional<std::string>& activity) {
  auto r = activity ? st.query(std::string(kBatchSelect) + "WHERE a.code = $1 ORDER BY b.id DESC", {*activity})
                    : st.query(std::string(kBatchSelect) + "ORDER BY b.id DESC");
  std::vector<Status> out;
  for (auto& row : r.rows) out.push_back(to_status(to_batch(row)));
  return out;
}

std::vector<Item> items(store::Store& st, const std::string& batch_no, const std::optional<std::string>& state,
                        int64_t limit) {
  if (state && !parse_state<ListItemState>(*state))
    throw Error(Errc::usage, "--state must be pending, held, issued, rejected, failed or cancelled, not '" + *state + "'");
  auto b = get_batch(st.autocommit(), batch_no);
  const std::string cols = "SELECT id, COALESCE(line, 0), user_id, state, record_code, reason, error, updated_at "
                           "FROM list_item WHERE batch_id = $1 ";
  auto r = state ? st.query(cols + "AND state = $2 ORDER BY id LIMIT $3", {b.id, *state, limit})
                 : st.query(cols + "ORDER BY id LIMIT $2", {b.id, limit});
  std::vector<Item> out;
  for (auto& row : r.rows) out.push_back(to_item(row));
  return out;
}

}  // namespace rc::jobs::list_issue
