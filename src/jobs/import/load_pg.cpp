// PostgreSQL loader. Row-at-a-time INSERTs cost a round trip each (~24k rows/s), so rows travel by
// COPY, and a Bloom filter splits them: a row whose user_id it has certainly not seen before is a
// first occurrence; only the "maybe seen" ones (repeats, and ~1% false positives) need a check.
//
// Merge mode (the activity already holds users of other imports): the whole batch is COPYed into a
// TEMP staging table (no WAL, no index); duplicates are found by a join limited to the flagged rows;
// then one INSERT ... SELECT ... ORDER BY user_id ON CONFLICT DO NOTHING — what conflicts was
// qualified before (existing). Sorted, the unique index grows page after page.
//
// Direct mode (no other import's users in the activity, e.g. a first import): a first occurrence can
// only conflict with a concurrent writer, so those rows are COPYed straight into qualification — the
// engine's own bulk load, which an INSERT ... SELECT cannot match — and only flagged and rejected
// rows go through staging. A unique violation (a concurrent import of the same users) fails the COPY:
// the batch is then retried from the file in merge mode.
//
// Either way the batch's rejects come back through a cursor in line order, so memory stays flat
// even for a file that is all rejects.
#include "jobs/import/load.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

#include "util/bloom.hpp"

namespace rc::jobs::import {
namespace {

// A rejected row's text may hold NUL bytes or invalid UTF-8, which PostgreSQL text refuses: it
// travels hex-encoded and is decoded back to the original bytes for the rejects file.
std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}
std::string unhex(const std::string& s) {
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  out.reserve(s.size() / 2);
  for (size_t i = 0; i + 1 < s.size(); i += 2) out += char(v(s[i]) << 4 | v(s[i + 1]));
  return out;
}

// A row held back from the direct COPY for the staging table.
struct Held {
  int64_t line;
  std::optional<std::string> user_id, ext, raw, error, expires_at;
};

std::optional<std::string> text(std::optional<Millis> t) {
  return t ? std::optional<std::string>(std::to_string(*t)) : std::nullopt;
}

class PgLoader : public Loader {
 public:
  PgLoader(store::Store& s, const Header& h, const RunIds& ids, RejectsWriter& rejects, bool across, uint64_t expected)
      : store_(s), h_(h), ids_(ids), rejects_(rejects), across_(across), bloom_(expected) {}

  void begin(store::Tx& tx) override {
    if (!checked_) {
      direct_ = tx.query("SELECT NOT EXISTS (SELECT 1 FROM qualification WHERE activity_id = $1::bigint "
                         "AND import_id IS DISTINCT FROM $2::text)",
                         {ids_.activity_id, ids_.import_id})[0]
                    .str(0) == "t";
      checked_ = true;
    }
    begun_ = std::chrono::steady_clock::now();
    tx_ = &tx;
    counts_ = {};
    staged_valid_ = flagged_ = direct_rows_ = 0;
    tx.exec_script(
        "CREATE TEMP TABLE rc_import_stg (line BIGINT NOT NULL, user_id TEXT, ext TEXT, raw TEXT, error TEXT, "
        "expires_at BIGINT) ON COMMIT DROP");
    if (direct_) open_direct();
    else open_stage();
  }

  void row(const csv::Record& rec, const std::string& user_id, const std::string& ext,
           std::optional<Millis> expires_at) override {
    const bool maybe = bloom_.test_and_add(user_id);
    std::optional<std::string> e;
    if (!ext.empty()) e = ext;
    if (direct_ && !maybe) {
      direct(rec.line, user_id, e, text(expires_at));
      return;
    }
    ++staged_valid_;
    // raw (the text for the rejects file) only travels for the rows that may turn out duplicates
    std::optional<std::string> raw;
    if (maybe) {
      ++flagged_;
      raw = reject_text(h_, rec);
    }
    stage({rec.line, user_id, std::move(e), std::move(raw), std::nullopt, text(expires_at)});
  }

  void reject(const csv::Record& rec, const std::string& why) override {
    ++counts_.rejected;
    stage({rec.line, std::nullopt, std::nullopt, hex(reject_text(h_, rec)), why, std::nullopt});
  }

  void skipped(const std::string& user_id) override { bloom_.test_and_add(user_id); }
  void abandon() override {
    // after a failed attempt (a lock timeout behind a concurrent import, say) the retry takes the
    // path that cannot conflict
    direct_ = false;
    bulk_.reset();
    held_.clear();
    held_bytes_ = 0;
  }

  Counts finish(store::Tx& tx) override {
    auto t0 = std::chrono::steady_clock::now();
    auto lap = [&t0](const char* what) {
      auto t = std::chrono::steady_clock::now();
      spdlog::debug("import batch: {} took {:.3f} s", what, std::chrono::duration<double>(t - t0).count());
      t0 = t;
    };
    spdlog::debug("import batch: reading and streaming {} rows ({} direct) took {:.3f} s",
                  direct_rows_ + staged_valid_ + counts_.rejected, direct_rows_,
                  std::chrono::duration<double>(t0 - begun_).count());
    if (direct_) {
      close_direct();
      spill();
    } else {
      close(bulk_);
    }
    lap("COPY end");
    // Statistics for the planner: without them PostgreSQL takes the fresh staging table for a few
    // dozen rows, whatever it holds (see stage_insert).
    if (staged_valid_ + counts_.rejected > 0) tx.exec_script("ANALYZE rc_import_stg");
    const int64_t dups = flagged_ ? find_duplicates(tx) : 0;
    lap("duplicate check");
    const int64_t staged_inserted = staged_valid_ > 0 ? stage_insert(tx, dups > 0) : 0;
    lap("INSERT ... SELECT");
    counts_.inserted = direct_rows_ + staged_inserted;
    counts_.existing = staged_valid_ - dups - staged_inserted;
    counts_.rejected += dups;
    if (counts_.rejected > 0) write_rejects(tx, dups > 0);
    tx.exec_script(dups ? "DROP TABLE rc_import_dup; DROP TABLE rc_import_stg" : "DROP TABLE rc_import_stg");
    tx_ = nullptr;
    return counts_;
  }

 private:
  void open_stage() {
    bulk_ = store_.bulk_writer(*tx_, "rc_import_stg", {"line", "user_id", "ext", "raw", "error", "expires_at"});
  }
  void open_direct() {
    // status takes the column default ('unused')
    bulk_ = store_.bulk_writer(*tx_, "qualification",
                               {"activity_id", "user_id", "source", "import_id", "import_line", "ext", "expires_at",
                                "created_at", "updated_at"});
  }
  static void close(std::unique_ptr<store::BulkWriter>& b) {
    if (!b) return;
    b->finish();
    b.reset();
  }

  void direct(int64_t line, const std::string& user_id, const std::optional<std::string>& ext,
              const std::optional<std::string>& expires_at) {
    ++direct_rows_;
    cells_.assign({std::to_string(ids_.activity_id), user_id, ids_.source, ids_.import_id, std::to_string(line), ext,
                   expires_at, std::to_string(ids_.now), std::to_string(ids_.now)});
    try {
      bulk_->write_row(cells_);
    } catch (const store::UniqueViolation& e) {
      conflict(e);
    }
  }

  void close_direct() {
    try {
      close(bulk_);
    } catch (const store::UniqueViolation& e) {
      conflict(e);
    }
  }

  // A concurrent writer qualified a user of this batch: the transaction is dead; retry it in merge mode.
  [[noreturn]] void conflict(const store::UniqueViolation& e) {
    direct_ = false;
    bulk_.reset();
    throw store::Retryable(std::string("a concurrent import added users of this batch (") + e.what() +
                           "): retrying it through the staging table");
  }

  void stage(Held h) {
    if (!direct_) {
      write_staged(h);
      return;
    }
    held_bytes_ += sizeof(Held) + (h.user_id ? h.user_id->size() : 0) + (h.ext ? h.ext->size() : 0) +
                   (h.expires_at ? h.expires_at->size() : 0) +
                   (h.raw ? h.raw->size() : 0) + (h.error ? h.error->size() : 0);
    held_.push_back(std::move(h));
    if (held_.size() >= 20000 || held_bytes_ >= (8 << 20)) {
      // one COPY at a time per connection: pause the direct one to unload the held rows
      close_direct();
      spill();
      open_direct();
    }
  }

  void write_staged(const Held& h) {
    cells_.assign({std::to_string(h.line), h.user_id, h.ext, h.raw, h.error, h.expires_at});
    bulk_->write_row(cells_);
  }

  // Moves the held rows into the staging table. REQUIRES: no COPY in progress.
  void spill() {
    if (held_.empty()) return;
    open_stage();
    for (auto& h : held_) write_staged(h);
    close(bulk_);
    held_.clear();
    held_bytes_ = 0;
  }

  // Inserts the batch's valid staged rows that are not duplicates; returns how many were new. A row
  // that conflicts was qualified before this import (existing). In a run over several transactions
  // those users are remembered in import_seen, so that a later repeat is a duplicate, not a second
  // "existing".
  //
  // import_seen is filled from what the INSERT did not return (an anti-join of the staging table
  // with the RETURNING rows: batch-sized on both sides), never by joining qualification again. That
  // join was the re-import's slowness: with the staging table not yet analyzed (estimated at ~30
  // rows) and qualification's statistics taken before the first import's COPY (the activity "has 1
  // row"), PostgreSQL chose a nested loop over every qualification of the activity, scanning the
  // whole staging table for each one - 200k x 20k comparisons per batch, minutes at 100 % CPU.
  int64_t stage_insert(store::Tx& tx, bool with_dups) {
    const std::string not_dup =
        with_dups ? " AND NOT EXISTS (SELECT 1 FROM rc_import_dup d WHERE d.line = s.line)" : "";
    const std::string insert =
        "INSERT INTO qualification (activity_id, user_id, status, source, import_id, import_line, ext, expires_at, "
        "created_at, updated_at) SELECT $1::bigint, s.user_id, 'unused', $3::text, $2::text, s.line, s.ext, "
        "s.expires_at, $4::bigint, $4::bigint FROM rc_import_stg s WHERE s.error IS NULL" + not_dup +
        " ORDER BY s.user_id ON CONFLICT (activity_id, user_id) DO NOTHING";
    const store::Params params{ids_.activity_id, ids_.import_id, ids_.source, ids_.now};
    tx.exec_script("SET LOCAL work_mem = '256MB'");  // the sort of a large batch stays in memory
    if (!across_) return tx.exec(insert, params);
    auto r = tx.query("WITH ins AS (" + insert + " RETURNING import_line), seen AS ("
                      "INSERT INTO import_seen (import_id, user_id, line) SELECT $2::text, s.user_id, s.line "
                      "FROM rc_import_stg s WHERE s.error IS NULL" + not_dup +
                          " AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.import_line = s.line) "
                          "ON CONFLICT DO NOTHING RETURNING 1) "
                          "SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM seen)",
                      params);
    return r[0].i64(0);
  }

  // The flagged rows that repeat a user accepted on an earlier line: of this batch (staging), of
  // this import (direct rows and earlier batches) or a user qualified before (import_seen).
  int64_t find_duplicates(store::Tx& tx) {
    tx.exec_script("CREATE TEMP TABLE rc_import_dup (line BIGINT PRIMARY KEY, first_line BIGINT) ON COMMIT DROP");
    const std::string flagged = " WHERE c.raw IS NOT NULL AND c.error IS NULL";
    const bool own = across_ || direct_rows_ > 0;
    std::string sql =
        "INSERT INTO rc_import_dup (line, first_line) SELECT line, min(first_line) FROM ("
        "SELECT c.line, s.line AS first_line FROM rc_import_stg c JOIN rc_import_stg s "
        "ON s.user_id = c.user_id AND s.line < c.line AND s.error IS NULL" + flagged;
    if (own)
      sql += " UNION ALL SELECT c.line, q.import_line FROM rc_import_stg c JOIN qualification q "
             "ON q.activity_id = $1::bigint AND q.user_id = c.user_id AND q.import_id = $2::text "
             "AND q.import_line < c.line" + flagged;
    if (across_)
      sql += " UNION ALL SELECT c.line, e.line FROM rc_import_stg c JOIN import_seen e "
             "ON e.import_id = $2::text AND e.user_id = c.user_id" + flagged;
    sql += ") d GROUP BY line";
    return tx.exec(sql, own ? store::Params{ids_.activity_id, ids_.import_id} : store::Params{});
  }

  void write_rejects(store::Tx& tx, bool with_dups) {
    tx.exec_script(
        std::string("DECLARE rc_import_rej NO SCROLL CURSOR FOR ") +
        (with_dups ? "SELECT s.line, s.raw, s.error, d.first_line FROM rc_import_stg s "
                     "LEFT JOIN rc_import_dup d ON d.line = s.line WHERE s.error IS NOT NULL OR d.line IS NOT NULL "
                     "ORDER BY s.line"
                   : "SELECT line, raw, error, NULL FROM rc_import_stg WHERE error IS NOT NULL ORDER BY line"));
    for (;;) {
      auto r = tx.query("FETCH 10000 FROM rc_import_rej");
      if (r.empty()) break;
      for (auto& row : r.rows) {
        // (line, raw, error, first_line): a row with an error has its raw text in hex; a duplicate
        // has no error, its text as read, and the line that listed the user first (if known)
        const int64_t line = row.i64(0);
        const std::string raw = row.str_or(1, "");
        const std::optional<std::string> error = row.opt_str(2);
        const std::optional<int64_t> first_line = row.opt_i64(3);
        std::string why = error ? *error
                          : first_line ? "duplicate user_id: first listed on line " + std::to_string(*first_line)
                                       : std::string("duplicate user_id: listed earlier in the file");
        rejects_.add(line, error ? unhex(raw) : raw, why);
      }
    }
    tx.exec_script("CLOSE rc_import_rej");
  }

  store::Store& store_;
  const Header& h_;
  RunIds ids_;
  RejectsWriter& rejects_;
  bool across_;
  util::Bloom bloom_;
  store::Tx* tx_ = nullptr;
  std::unique_ptr<store::BulkWriter> bulk_;
  std::vector<std::optional<std::string>> cells_;
  std::vector<Held> held_;
  size_t held_bytes_ = 0;
  Counts counts_;
  int64_t staged_valid_ = 0, flagged_ = 0, direct_rows_ = 0;
  bool checked_ = false, direct_ = false;
  std::chrono::steady_clock::time_point begun_;
};

}  // namespace

std::unique_ptr<Loader> make_pg_loader(store::Store& s, const Header& h, const RunIds& ids, RejectsWriter& rejects,
                                       bool across_batches, uint64_t expected_rows) {
  return std::make_unique<PgLoader>(s, h, ids, rejects, across_batches, expected_rows);
}

}  // namespace rc::jobs::import
