// qualification revoke | show | count. A revoke is the state change unused -> revoked: one
// conditional update per qualification and exactly one status-log row for each that changed, in the
// same transaction (DESIGN §3). Rows the update did not match (no qualification, or used, revoked,
// expired) are counted and left alone, which makes a rerun of the same file harmless.
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>

#include "core/activity/activity.hpp"
#include "core/audit.hpp"
#include "core/interrupt.hpp"
#include "jobs/runtime/batch.hpp"
#include "jobs/import/import_qualifications.hpp"
#include "jobs/input/input.hpp"

namespace rc::jobs {

Exit RevokeResult::exit_code() const {
  if (over_limit) return Exit::data;
  if (interrupted) return Exit::interrupted;
  return rejected > 0 ? Exit::partial : Exit::ok;
}

namespace {

constexpr int64_t kChunk = 50000;  // users held in memory at a time

struct RevokeCounts {
  int64_t read = 0, revoked = 0, not_found = 0, rejected = 0, valid = 0;
};

// PostgreSQL: the batch's users go to a staging table by COPY; one statement revokes them and writes
// their status-log rows (the UPDATE's RETURNING feeds the INSERT, so each revoked row gets one).
void revoke_pg(store::Store& s, store::Tx& tx, const std::vector<std::string>& users, int64_t activity_id,
               const RevokeOptions& o, Millis now, RevokeCounts& c) {
  tx.exec_script("CREATE TEMP TABLE rc_revoke_stg (user_id TEXT NOT NULL) ON COMMIT DROP");
  {
    auto bulk = s.bulk_writer(tx, "rc_revoke_stg", {"user_id"});
    std::vector<std::optional<std::string>> cell(1);
    for (auto& u : users) {
      cell[0] = u;
      bulk->write_row(cell);
    }
    bulk->finish();
  }
  c.revoked += tx.exec(
      "WITH r AS (UPDATE qualification q SET status = 'revoked', updated_at = $3::bigint "
      "FROM (SELECT DISTINCT user_id FROM rc_revoke_stg) s "
      "WHERE q.activity_id = $1::bigint AND q.user_id = s.user_id AND q.status = 'unused' RETURNING q.id) "
      + kStatusLogInsert + "SELECT 'qualification', id, 'unused', 'revoked', $2::text, $4::text, NULL, $3::bigint FROM r",
      {activity_id, o.operator_name, now, o.reason.empty() ? store::kNull : store::Value(o.reason)});
  c.not_found += tx.query(
                       "SELECT count(*) FROM rc_revoke_stg s WHERE NOT EXISTS (SELECT 1 FROM qualification q "
                       "WHERE q.activity_id = $1::bigint AND q.user_id = s.user_id)",
                       {activity_id})[0]
                     .i64(0);
  tx.exec_script("DROP TABLE rc_revoke_stg");
}

// SQLite: per user, a lookup and the shared transition helper (update + status-log row).
void revoke_sqlite(store::Tx& tx, const std::vector<std::string>& users, int64_t activity_id, const RevokeOptions& o,
                   Millis now, RevokeCounts& c) {
  std::optional<std::string> reason;
  if (!o.reason.empty()) reason = o.reason;
  for (auto& u : users) {
    auto q = tx.query("SELECT id, status FROM qualification WHERE activity_id = $1 AND user_id = $2", {activity_id, u});
    if (q.empty()) {
      ++c.not_found;
      continue;
    }
    using Q = QualificationStatus;
    const int64_t id = q[0].i64(0);
    const Q status = state_from_db<Q>(q[0].str(1));
    if (status == Q::unused && transition(tx, id, Q::unused, Q::revoked, o.operator_name, reason, now))
      ++c.revoked;
  }
}

}  // namespace

RevokeResult revoke_qualifications(store::Store& s, const RevokeOptions& o, const Clock& clock) {
  auto t0 = std::chrono::steady_clock::now();
  const Millis now = clock.now_ms();
  auto in = import::open_input(o.file);
  const int64_t activity_id = activity::id_of(s, o.activity);
  auto& rd = *in->reader;
  import::Header h = import::read_header(rd);
  std::string header_text;
  for (auto& n : h.names)
    if (n != "_line" && n != "_error") {
      if (!header_text.empty()) header_text += ',';
      csv::append_field(header_text, n);
    }
  import::RejectsWriter rejects(o.rejects_path.empty() ? import::default_rejects_path(o.file) : o.rejects_path,
                                header_text, !o.dry_run || !o.rejects_path.empty());
  Progress progress(o.progress, "revoke " + o.activity, in->size, "rows");
  const bool commit_each = o.batch_size > 0 && !o.dry_run;

  RevokeCounts total, over_counts;
  bool eof = false, over = false;
  csv::Record rec;
  std::string uid, ext;
  std::vector<std::string> users;  // one chunk of user ids
  bool stopped = false;
  try {
  while (!eof && !over) {
    RevokeCounts pending;
    const uint64_t mark = rejects.flush();
    // a retried batch reads its rows again: from the start of the file, skipping what is committed
    auto rewind = [&] {
      if (!rd.rewindable())
        throw Error(Errc::unavailable, "the database asked to retry, and standard input cannot be read again: rerun");
      rd.rewind();
      import::read_header(rd);
      for (int64_t i = 0; i < total.read && rd.next(rec); ++i) {
      }
      rejects.truncate_to(mark);
    };
    transact_batch(s, rewind, [&](store::Tx& tx) {
      pending = total;
      eof = false;
      // One transaction: a batch, or the whole file; applied in chunks so memory stays flat.
      int64_t in_batch = 0;
      bool batch_full = false;
      do {
        users.clear();
        int64_t n = 0;
        while (n < kChunk && !batch_full) {
          if (!rd.next(rec)) {
            eof = true;
            break;
          }
          ++n;
          batch_full = o.batch_size > 0 && ++in_batch == o.batch_size;
          std::string why = import::check_row(h, rec, uid, ext);
          if (why.empty()) {
            users.push_back(uid);
          } else {
            rejects.add(rec.line, import::reject_text(h, rec), why);
            ++pending.rejected;
          }
          progress.update(pending.read + n, rd.bytes_read());
        }
        check_interrupted();
        pending.read += n;
        pending.valid += int64_t(users.size());
        if (s.dialect() == store::Dialect::postgres) revoke_pg(s, tx, users, activity_id, o, now, pending);
        else revoke_sqlite(tx, users, activity_id, o, now, pending);
        if (batch_full && !commit_each) batch_full = false, in_batch = 0;
      } while (!eof && !batch_full);
      over = o.max_rejects.over(pending.rejected, pending.read);
      if (over) {
        over_counts = pending;
        tx.rollback_only();
        return;
      }
      if (eof) {
        nlohmann::json d = {{"file", o.file},          {"read", pending.read},          {"revoked", pending.revoked},
                            {"not_found", pending.not_found}, {"rejected", pending.rejected}, {"reason", o.reason}};
        audit(tx, o.operator_name, "qualification.revoke", "activity", o.activity,
              d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), now);
      }
      if (o.dry_run) tx.rollback_only();
    });
    if (!over) total = pending;
    check_interrupted();
  }
  } catch (const Error& e) {
    // a signal: the batches committed before it stay, and their counts are the result
    if (e.kind() != Errc::interrupted) throw;
    stopped = true;
  }
  progress.finish();

  RevokeResult r;
  const RevokeCounts& c = over ? over_counts : total;
  r.activity = o.activity;
  r.file = o.file;
  r.limit = o.max_rejects.text();
  r.read = c.read;
  r.revoked = c.revoked;
  r.not_found = c.not_found;
  r.not_unused = c.valid - c.revoked - c.not_found;
  r.rejected = c.rejected;
  r.dry_run = o.dry_run;
  r.over_limit = over;
  r.interrupted = stopped;
  if (rejects.enabled() && c.rejected > 0) r.rejects_path = rejects.path();
  else rejects.remove_stale();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::optional<Qualification> find_qualification(store::Store& s, const std::string& activity,
                                                const std::string& user) {
  const int64_t id = activity::id_of(s, activity);
  auto r = s.query(
      "SELECT user_id, status, source, import_id, ext, import_line, expires_at, created_at, updated_at "
      "FROM qualification WHERE activity_id = $1 AND user_id = $2",
      {id, import::trim_user_id(user)});
  if (r.empty()) return std::nullopt;
  const auto& row = r[0];
  Qualification q;
  q.user_id = row.str(0);
  q.status = state_from_db<QualificationStatus>(row.str(1));
  q.source = row.opt_str(2);
  q.import_id = row.opt_str(3);
  q.ext = row.opt_str(4);
  q.import_line = row.opt_i64(5);
  q.expires_at = row.opt_i64(6);
  q.created_at = row.i64(7);
  q.updated_at = row.i64(8);
  return q;
}

int64_t count_qualifications(store::Store& s, const std::string& activity, const std::optional<std::string>& status) {
  if (status && !parse_state<QualificationStatus>(*status))
    throw Error(Errc::usage, "--status must be unused, used, revoked or expired, not '" + *status + "'");
  const int64_t id = activity::id_of(s, activity);
  if (status)
    return s.query("SELECT count(*) FROM qualification WHERE activity_id = $1 AND status = $2", {id, *status})[0].i64(0);
  return s.query("SELECT count(*) FROM qualification WHERE activity_id = $1", {id})[0].i64(0);
}

}  // namespace rc::jobs
