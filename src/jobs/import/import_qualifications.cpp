// import-qualifications: reads the file once, in batches; each batch is a transaction (or the whole
// file is one) that loads its rows, checks the reject budget and records the run. The order inside a
// transaction matters for resume: the rows and the import_run counters commit together, so the
// committed row count is always exactly the point a rerun continues from.
#include "jobs/import/import_qualifications.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>

#include "core/activity/activity.hpp"
#include "core/audit.hpp"
#include "core/interrupt.hpp"
#include "jobs/runtime/batch.hpp"
#include "jobs/input/input.hpp"
#include "util/hash.hpp"

namespace rc::jobs {

using import::Counts;

Exit ImportResult::exit_code() const {
  if (over_limit) return Exit::data;
  if (interrupted) return Exit::interrupted;
  return counts.rejected > 0 ? Exit::partial : Exit::ok;
}

namespace {

std::string base_name(const std::string& f) {
  if (f == "-") return "stdin";
  auto s = f.rfind('/');
  return s == std::string::npos ? f : f.substr(s + 1);
}

struct Resume {
  bool found = false;
  int64_t run_id = 0, rows_committed = 0;
  std::string import_id;
  Counts counts;
  uint64_t rejects_bytes = 0;
};

Resume find_running(store::Store& s, int64_t activity_id, const std::string& sha, const std::string& source) {
  Resume r;
  auto q = s.query(
      "SELECT id, import_id, rows_committed, inserted, existing, rejected, rejects_bytes FROM import_run "
      "WHERE activity_id = $1 AND file_sha256 = $2 AND source = $3 AND state = 'running' ORDER BY id DESC LIMIT 1",
      {activity_id, sha, source});
  if (q.empty()) return r;
  r.found = true;
  r.run_id = q[0].i64(0);
  r.import_id = q[0].str(1);
  r.rows_committed = r.counts.read = q[0].i64(2);
  r.counts.inserted = q[0].i64(3);
  r.counts.existing = q[0].i64(4);
  r.counts.rejected = q[0].i64(5);
  r.rejects_bytes = uint64_t(q[0].i64(6));
  return r;
}

class ImportRun {
 public:
  ImportRun(store::Store& s, const ImportOptions& o, Millis now) : s_(s), o_(o), now_(now) {}

  ImportResult run() {
    auto t0 = std::chrono::steady_clock::now();
    if (o_.expires_at && *o_.expires_at <= now_)
      throw Error(Errc::usage, "--expires-at " + format_utc(*o_.expires_at) + " is not in the future (now " +
                                   format_utc(now_) + "): nothing was imported");
    in_ = import::open_input(o_.file);
    activity_id_ = activity::id_of(s_, o_.activity);
    in_->reader->set_tap([this](const char* p, size_t n) {
      if (!prehashed_) hash_.update(p, n);
    });
    h_ = import::read_header(*in_->reader);
    source_ = o_.source.empty() ? base_name(o_.file) : o_.source;
    const bool batched = o_.batch_size > 0;
    commit_each_ = batched && !o_.dry_run;
    if (batched && in_->reader->rewindable()) {
      sha_ = sha256_fd(in_->fd, in_->reader->start_offset(), o_.file);
      prehashed_ = true;
      resume_ = find_running(s_, activity_id_, sha_, source_);
    }
    std::string header_text;
    for (size_t i = 0; i < h_.names.size(); ++i)
      if (h_.names[i] != "_line" && h_.names[i] != "_error") {
        if (!header_text.empty()) header_text += ',';
        csv::append_field(header_text, h_.names[i]);
      }
    rejects_ = std::make_unique<import::RejectsWriter>(
        o_.rejects_path.empty() ? import::default_rejects_path(o_.file) : o_.rejects_path, header_text,
        !o_.dry_run || !o_.rejects_path.empty());
    ids_ = {activity_id_, resume_.found ? resume_.import_id : new_id("imp_", now_), source_, now_};
    if (resume_.found) {
      spdlog::info("resuming import {} of {}: {} rows were committed by an earlier run", ids_.import_id, o_.file,
                   resume_.rows_committed);
      if (!o_.dry_run && !rejects_->resume(resume_.rejects_bytes))
        spdlog::warn("the rejects file {} is shorter than when the earlier run committed: its first rejects are lost",
                     rejects_->path());
    }
    if (s_.dialect() == store::Dialect::postgres)
      loader_ = import::make_pg_loader(s_, h_, ids_, *rejects_, batched || resume_.found,
                                       in_->size ? in_->size / 16 : 10'000'000);
    else
      loader_ = import::make_sqlite_loader(h_, ids_, *rejects_);
    progress_ = std::make_unique<Progress>(o_.progress, "import " + o_.activity, in_->size, "rows");

    skip_committed();
    total_ = resume_.counts;
    consumed_ = resume_.rows_committed;
    run_id_ = resume_.run_id;
    bool stopped = false;
    try {
      while (!eof_ && !over_) transaction();
    } catch (const Error& e) {
      // a signal: the batches committed before it stay, and their counts are the result
      if (e.kind() != Errc::interrupted) throw;
      stopped = true;
    }
    progress_->finish();

    ImportResult r;
    r.activity = o_.activity;
    r.file = o_.file;
    r.import_id = ids_.import_id;
    r.sha256 = prehashed_ ? sha_ : hash_.hex();
    r.counts = over_ ? over_counts_ : total_;
    r.resumed_from = resume_.rows_committed;
    r.resumed = resume_.counts;
    r.interrupted = stopped;
    r.dry_run = o_.dry_run;
    r.over_limit = over_;
    r.limit = o_.max_rejects.text();
    if (rejects_->enabled() && r.counts.rejected > 0) r.rejects_path = rejects_->path();
    else rejects_->remove_stale();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

 private:
  // Resume: the rows an earlier run committed are read again (to find later repeats) but not loaded.
  void skip_committed() {
    csv::Record rec;
    std::string uid, ext;
    for (int64_t i = 0; i < resume_.rows_committed; ++i) {
      if (!in_->reader->next(rec))
        throw Error(Errc::bad_input, in_->reader->where(in_->reader->line()) + ": the file has fewer rows than the " +
                                         std::to_string(resume_.rows_committed) + " an earlier run committed");
      if (import::check_row(h_, rec, uid, ext).empty()) loader_->skipped(uid);
      progress_->update(i + 1, in_->reader->bytes_read());
    }
  }

  // A retried transaction reads its rows again: from the start of the file, skipping what is committed.
  void restart() {
    auto& rd = *in_->reader;
    if (!rd.rewindable())
      throw Error(Errc::unavailable, "the database asked to retry the transaction, and standard input cannot be read "
                                     "again: rerun the command (rows already imported count as existing)");
    spdlog::debug("retrying the batch that starts after row {}", consumed_);
    rd.rewind();
    hash_.reset();
    import::read_header(rd);
    csv::Record rec;
    for (int64_t i = 0; i < consumed_ && rd.next(rec); ++i) {
    }
    rejects_->truncate_to(rejects_mark_);
    loader_->abandon();
  }

  // Reads up to batch_size rows (all when 0) into the loader and applies them.
  Counts load_batch(store::Tx& tx, int64_t already) {
    csv::Record rec;
    std::string uid, ext;
    std::optional<Millis> expires_at;
    loader_->begin(tx);
    int64_t n = 0;
    auto& rd = *in_->reader;
    while ((o_.batch_size == 0 || n < o_.batch_size) && rd.next(rec)) {
      ++n;
      std::string why = import::check_row(h_, rec, uid, ext);
      if (why.empty()) why = import::row_expiry(h_, rec, now_, expires_at);
      if (why.empty()) loader_->row(rec, uid, ext, expires_at ? expires_at : o_.expires_at);
      else loader_->reject(rec, why);
      progress_->update(already + n, rd.bytes_read());
      if ((n & 4095) == 0) check_interrupted();
    }
    eof_ = o_.batch_size == 0 || n < o_.batch_size;
    if (s_.dialect() == store::Dialect::postgres) progress_->phase("inserting");
    Counts c = loader_->finish(tx);
    progress_->phase("");
    c.read = n;
    return c;
  }

  void transaction() {
    Counts pending;
    int64_t pending_run_id = run_id_;
    rejects_mark_ = rejects_->flush();
    transact_batch(s_, [this] { restart(); }, [&](store::Tx& tx) {
      Counts acc;
      try {
        do acc += load_batch(tx, total_.read + acc.read);
        while (!commit_each_ && !eof_);
      } catch (...) {
        loader_->abandon();
        throw;
      }
      pending = total_;
      pending += acc;
      over_ = o_.max_rejects.over(pending.rejected, pending.read);
      if (over_) {
        over_counts_ = pending;
        tx.rollback_only();
        return;
      }
      pending_run_id = record_run(tx, pending);
      if (o_.dry_run) tx.rollback_only();
    });
    if (over_) return;
    total_ = pending;
    consumed_ = total_.read;
    run_id_ = pending_run_id;
    check_interrupted();
  }

  // import_run (and, at the end, the audit row) in the batch's transaction. Returns the run's id.
  int64_t record_run(store::Tx& tx, const Counts& c) {
    const uint64_t rej_bytes = rejects_->flush();
    const std::string sha = prehashed_ ? sha_ : (eof_ ? hash_.hex() : "");
    const ImportRunState state = eof_ ? ImportRunState::done : ImportRunState::running;
    int64_t id = run_id_;
    if (id == 0) {
      id = tx.query("INSERT INTO import_run (import_id, activity_id, file_sha256, source, rows_committed, inserted, "
                    "existing, rejected, rejects_bytes, operator, state, created_at, updated_at) "
                    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) RETURNING id",
                    {ids_.import_id, activity_id_, sha, source_, c.read, c.inserted, c.existing, c.rejected,
                     int64_t(rej_bytes), o_.operator_name, name(state), now_})[0]
               .i64(0);
      log_created(tx, id, state, o_.operator_name, std::nullopt, now_);
    } else {
      // Guarded by the previous count: two runs resuming the same import cannot both advance it.
      bool ok = tx.exec("UPDATE import_run SET state = $1, updated_at = $2, rows_committed = $3, inserted = $4, "
                        "existing = $5, rejected = $6, rejects_bytes = $7, file_sha256 = $8 "
                        "WHERE id = $9 AND state = 'running' AND rows_committed = $10",
                        {name(state), now_, c.read, c.inserted, c.existing, c.rejected, int64_t(rej_bytes), sha, id,
                         consumed_}) == 1;
      if (ok && eof_)
        log_moved(tx, id, ImportRunState::running, state, o_.operator_name, std::nullopt, now_);
      if (!ok)
        throw Error(Errc::busy, "another rewardctl is running import " + ids_.import_id + " of " + o_.file +
                                    ": let it finish (a rerun afterwards changes nothing)");
    }
    if (eof_) {
      tx.exec("DELETE FROM import_seen WHERE import_id = $1", {ids_.import_id});
      nlohmann::json d = {{"import_id", ids_.import_id}, {"file", o_.file}, {"sha256", sha},
                          {"source", source_},          {"read", c.read},  {"inserted", c.inserted},
                          {"existing", c.existing},     {"rejected", c.rejected},
                          {"batch_size", o_.batch_size}, {"resumed_from", resume_.rows_committed}};
      audit(tx, o_.operator_name, "qualification.import", "activity", o_.activity,
            d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), now_);
    }
    return id;
  }

  store::Store& s_;
  const ImportOptions& o_;
  Millis now_;
  std::unique_ptr<import::Input> in_;
  import::Header h_;
  Sha256 hash_;
  std::string sha_, source_;
  bool prehashed_ = false, commit_each_ = false, eof_ = false, over_ = false;
  Resume resume_;
  int64_t activity_id_ = 0, run_id_ = 0, consumed_ = 0;
  import::RunIds ids_;
  std::unique_ptr<import::RejectsWriter> rejects_;
  uint64_t rejects_mark_ = 0;
  std::unique_ptr<import::Loader> loader_;
  std::unique_ptr<Progress> progress_;
  Counts total_, over_counts_;
};

}  // namespace

ImportResult import_qualifications(store::Store& s, const ImportOptions& o, const Clock& clock) {
  return ImportRun(s, o, clock.now_ms()).run();
}

}  // namespace rc::jobs
