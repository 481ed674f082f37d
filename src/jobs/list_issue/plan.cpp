// list-issue plan: reads the list once (the row rules and rejects file of import-qualifications),
// dedupes it in the database (UNIQUE (batch_id, user_id): memory stays flat whatever the list's
// size), and stores batch and items in one transaction — or nothing at all when the list is refused.
#include <limits>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/activity/activity.hpp"
#include "core/activity/versions.hpp"
#include "core/audit.hpp"
#include "core/engine/budget.hpp"
#include "jobs/import/rows.hpp"
#include "jobs/input/input.hpp"
#include "jobs/input/rejects_writer.hpp"
#include "util/hash.hpp"
#include "core/interrupt.hpp"
#include "jobs/list_issue/list_issue.hpp"
#include "jobs/list_issue/internal.hpp"

namespace rc::jobs::list_issue {

std::string item_biz_id(const std::string& batch_no, const std::string& user) { return batch_no + ":" + user; }

namespace {

constexpr size_t kRowsPerInsert = 500;

struct PrizeFacts {
  int64_t id = 0, unit_cost_cents = 0, stock_left = 0;
  bool high_value = false;
};

PrizeFacts prize_facts(store::Session& s, int64_t activity_id, const std::string& activity, const std::string& code) {
  auto r = s.query(
      "SELECT p.id, COALESCE(p.amount_max, p.amount) * i.unit_cost_cents, "
      "(SELECT COALESCE(SUM(remain), 0) FROM stock WHERE prize_id = p.id), p.high_value "
      "FROM prize p JOIN item i ON i.id = p.item_id WHERE p.activity_id = $1 AND p.code = $2",
      {activity_id, code});
  if (r.empty()) throw Error(Errc::not_found, "activity '" + activity + "' has no prize '" + code + "' (see rewardctl activity show " + activity + ")");
  return {r[0].i64(0), r[0].i64(1), r[0].i64(2), r[0].i64(3) != 0};
}

// Buffers item rows and inserts them many per statement; duplicates are skipped by the unique key.
class ItemWriter {
 public:
  ItemWriter(store::Tx& tx, int64_t batch_id, Millis now) : tx_(tx), batch_id_(batch_id), now_(now) {}
  void add(const std::string& user, int64_t line) {
    rows_.emplace_back(user, line);
    if (rows_.size() == kRowsPerInsert) flush();
  }
  // Returns the number of distinct users stored so far.
  int64_t flush() {
    if (rows_.empty()) return inserted_;
    std::string sql = "INSERT INTO list_item (batch_id, user_id, line, state, updated_at) VALUES ";
    store::Params p{batch_id_, now_};
    for (size_t i = 0; i < rows_.size(); ++i) {
      size_t k = p.size() + 1;
      sql += (i ? ", ($1, $" : "($1, $") + std::to_string(k) + ", $" + std::to_string(k + 1) + ", 'pending', $2)";
      p.emplace_back(rows_[i].first);
      p.emplace_back(rows_[i].second);
    }
    sql += " ON CONFLICT (batch_id, user_id) DO NOTHING";
    inserted_ += tx_.exec(sql, p);
    rows_.clear();
    return inserted_;
  }

 private:
  store::Tx& tx_;
  int64_t batch_id_;
  Millis now_;
  std::vector<std::pair<std::string, int64_t>> rows_;
  int64_t inserted_ = 0;
};

}  // namespace

PlanResult plan(store::Store& st, const PlanOptions& o, const Clock& clock) {
  const Millis now = clock.now_ms();
  PlanResult res;
  int attempt = 0;
  st.transact(store::TxMode::write, [&](store::Tx& tx) {
    if (attempt++ > 0 && o.file == "-")
      throw Error(Errc::unavailable, "the database asked to retry, and standard input cannot be read again: rerun the command");
    res = PlanResult{};
    res.activity = o.activity;
    res.prize = o.prize;
    res.file = o.file;
    res.dry_run = o.dry_run;
    res.limit = o.max_rejects.text();
    auto in = import::open_input(o.file);
    auto act = activity::get(tx, o.activity);
    // Only a published activity: a definition under review can still be replaced (activity update),
    // and a batch must run against exactly the definition it was planned and approved for.
    if (!activity::is_running(act.state))
      throw Error(Errc::conflict, "activity '" + o.activity + "' is " + name(act.state) +
                                      ": plan a list for a published activity (gray, live or paused)");
    // A lottery draws its prize; a list gives every user the one prize named.
    if (act.kind == activity::Kind::lottery)
      throw Error(Errc::conflict, "activity '" + o.activity + "' is a lottery: list-issue gives one named prize (direct or redpack)");
    res.definition_hash = act.definition_hash;
    auto prize = prize_facts(tx, act.id, o.activity, o.prize);
    res.unit_cost_cents = prize.unit_cost_cents;
    res.stock_left = prize.stock_left;
    auto b = tx.query("SELECT authorised_cents - consumed_cents FROM budget WHERE activity_id = $1", {act.id});
    if (!b.empty()) res.budget_left = b[0].i64(0);
    if (auto n = engine::budget_takes_left(tx, act.id, prize.unit_cost_cents, prize.high_value);
        n && *n != std::numeric_limits<int64_t>::max())
      res.budget_grants = n;

    Sha256 hash;
    in->reader->set_tap([&](const char* p, size_t n) { hash.update(p, n); });
    auto h = import::read_header(*in->reader);
    std::string header_text;
    for (auto& n : h.names)
      if (n != "_line" && n != "_error") {
        if (!header_text.empty()) header_text += ',';
        csv::append_field(header_text, n);
      }
    import::RejectsWriter rejects(o.rejects_path.empty() ? import::default_rejects_path(o.file) : o.rejects_path,
                                  header_text, !o.dry_run || !o.rejects_path.empty());
    res.batch_no = new_id("L", now);
    const int64_t batch_id =
        tx.query("INSERT INTO list_batch (batch_no, activity_id, prize_id, file_sha256, state, total, created_by, "
                 "created_at, updated_at, file_name, definition_hash) VALUES ($1, $2, $3, '', 'planned', 0, $4, $5, $5, "
                 "$6, $7) RETURNING id",
                 {res.batch_no, act.id, prize.id, o.operator_name, now, o.file == "-" ? std::string("stdin") : o.file,
                  act.definition_hash})[0]
            .i64(0);
    Progress progress(o.progress, "plan " + o.activity, in->size, "rows");
    ItemWriter items(tx, batch_id, now);
    csv::Record rec;
    std::string uid, ext;
    int64_t valid = 0;
    while (in->reader->next(rec)) {
      ++res.read;
      std::string why = import::check_row(h, rec, uid, ext);
      if (why.empty()) {
        ++valid;
        items.add(uid, rec.line);
      } else {
        ++res.rejected;
        rejects.add(rec.line, import::reject_text(h, rec), why);
      }
      progress.update(res.read, in->reader->bytes_read());
      if ((res.read & 4095) == 0) check_interrupted();
    }
    progress.finish();
    res.users = items.flush();
    res.duplicates = valid - res.users;
    res.sha256 = hash.hex();
    rejects.flush();
    if (res.rejected > 0 && rejects.enabled()) res.rejects_path = rejects.path();
    else rejects.remove_stale();
    res.over_limit = o.max_rejects.over(res.rejected, res.read);
    if (!res.over_limit && res.users == 0)
      throw Error(Errc::bad_input, o.file + ": no valid user in the list (" + std::to_string(res.rejected) + " rows rejected)");
    if (__builtin_mul_overflow(res.users, res.unit_cost_cents, &res.cost_cents))
      throw Error(Errc::bad_input, o.file + ": the batch's cost overflows 64 bits");
    res.fits = res.stock_left >= res.users && (!res.budget_left || *res.budget_left >= res.cost_cents) &&
               (!res.budget_grants || *res.budget_grants >= res.users);
    if (res.over_limit || (!res.fits && !o.allow_partial) || o.dry_run) {
      tx.rollback_only();
      return;
    }
    tx.exec("UPDATE list_batch SET file_sha256 = $1, total = $2, cost_cents = $3, rejected = $4, duplicates = $5, "
            "fits = $6 WHERE id = $7",
            {res.sha256, res.users, res.cost_cents, res.rejected, res.duplicates, int64_t(res.fits), batch_id});
    log_created(tx, batch_id, ListBatchState::planned, o.operator_name,
                std::to_string(res.users) + " users from " + o.file, now);
    nlohmann::json d = {{"batch", res.batch_no},        {"prize", o.prize},         {"file", o.file},
                        {"sha256", res.sha256},         {"users", res.users},       {"rejected", res.rejected},
                        {"duplicates", res.duplicates}, {"cost_cents", res.cost_cents}, {"fits", res.fits},
                        {"definition_hash", res.definition_hash}};
    audit(tx, o.operator_name, "list_issue.plan", "activity", o.activity,
          d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), now);
    res.stored = true;
  });
  if (res.stored)
    spdlog::info("planned batch {} in {}: {} users, {} rejected, {} duplicates, cost {} cents{}", res.batch_no,
                 res.activity, res.users, res.rejected, res.duplicates, res.cost_cents,
                 res.fits ? "" : " (stock or budget do not cover it: --allow-partial)");
  return res;
}

}  // namespace rc::jobs::list_issue
