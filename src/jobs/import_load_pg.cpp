// PostgreSQL loader. Row-at-a-time INSERTs cost a round trip each (~24k rows/s); COPY streams the
// batch into a TEMP staging table (no WAL, no index) and the server does the rest set-wise:
//  1. duplicates: only rows the Bloom filter flags as "maybe seen" (a repeat, or a rare false
//     positive) are checked, by a join against the staging table (and, across batches, against this
//     import's committed rows and import_seen) — never a sort of the whole batch;
//  2. one INSERT ... SELECT ... ON CONFLICT DO NOTHING; what conflicts was qualified before: existing;
//  3. the batch's rejects come back through a cursor in line order, so memory stays flat even for a
//     file that is all rejects.
#include "jobs/import_load.hpp"

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

class PgLoader : public Loader {
 public:
  PgLoader(store::Store& s, const Header& h, const RunIds& ids, RejectsWriter& rejects, bool across, uint64_t expected)
      : store_(s), h_(h), ids_(ids), rejects_(rejects), across_(across), bloom_(expected) {
    cells_.resize(5);
  }

  void begin(store::Tx& tx) override {
    counts_ = {};
    valid_ = flagged_ = 0;
    tx.exec_script(
        "CREATE TEMP TABLE rc_import_stg (line BIGINT NOT NULL, user_id TEXT, ext TEXT, raw TEXT, error TEXT) "
        "ON COMMIT DROP");
    bulk_ = store_.bulk_writer(tx, "rc_import_stg", {"line", "user_id", "ext", "raw", "error"});
  }

  void row(const csv::Record& rec, const std::string& user_id, const std::string& ext) override {
    ++valid_;
    cells_[0] = std::to_string(rec.line);
    cells_[1] = user_id;
    if (ext.empty()) cells_[2].reset();
    else cells_[2] = ext;
    // raw (the text for the rejects file) only travels for the rows that may turn out duplicates
    if (bloom_.test_and_add(user_id)) {
      ++flagged_;
      cells_[3] = reject_text(h_, rec);
    } else {
      cells_[3].reset();
    }
    cells_[4].reset();
    bulk_->write_row(cells_);
  }

  void reject(const csv::Record& rec, const std::string& why) override {
    ++counts_.rejected;
    cells_[0] = std::to_string(rec.line);
    cells_[1].reset();
    cells_[2].reset();
    cells_[3] = hex(reject_text(h_, rec));
    cells_[4] = why;
    bulk_->write_row(cells_);
  }

  void skipped(const std::string& user_id) override { bloom_.test_and_add(user_id); }
  void abandon() override { bulk_.reset(); }

  Counts finish(store::Tx& tx) override {
    bulk_->finish();
    bulk_.reset();
    const store::Params ids{ids_.activity_id, ids_.import_id};
    int64_t dups = 0;
    if (flagged_ > 0) {
      tx.exec_script("ANALYZE rc_import_stg");
      tx.exec_script("CREATE TEMP TABLE rc_import_dup (line BIGINT PRIMARY KEY, first_line BIGINT) ON COMMIT DROP");
      const std::string flagged = " WHERE c.raw IS NOT NULL AND c.error IS NULL";
      std::string sql =
          "INSERT INTO rc_import_dup (line, first_line) SELECT line, min(first_line) FROM ("
          "SELECT c.line, s.line AS first_line FROM rc_import_stg c JOIN rc_import_stg s "
          "ON s.user_id = c.user_id AND s.line < c.line AND s.error IS NULL" + flagged;
      if (across_)
        sql += " UNION ALL SELECT c.line, q.import_line FROM rc_import_stg c JOIN qualification q "
               "ON q.activity_id = $1::bigint AND q.user_id = c.user_id AND q.import_id = $2::text" + flagged +
               " UNION ALL SELECT c.line, e.line FROM rc_import_stg c JOIN import_seen e "
               "ON e.import_id = $2::text AND e.user_id = c.user_id" + flagged;
      sql += ") d GROUP BY line";
      dups = tx.exec(sql, across_ ? ids : store::Params{});
    }
    const std::string not_dup = dups ? " AND NOT EXISTS (SELECT 1 FROM rc_import_dup d WHERE d.line = s.line)" : "";
    counts_.inserted = tx.exec(
        "INSERT INTO qualification (activity_id, user_id, status, source, import_id, import_line, ext, created_at, "
        "updated_at) SELECT $1::bigint, s.user_id, 'unused', $3::text, $2::text, s.line, s.ext, $4::bigint, $4::bigint "
        "FROM rc_import_stg s WHERE s.error IS NULL" + not_dup + " ON CONFLICT (activity_id, user_id) DO NOTHING",
        {ids_.activity_id, ids_.import_id, ids_.source, ids_.now});
    counts_.existing = valid_ - dups - counts_.inserted;
    if (across_ && counts_.existing > 0) {
      // remembered so that a repeat in a later batch (or after a resume) is a duplicate, not existing
      tx.exec("INSERT INTO import_seen (import_id, user_id, line) SELECT $2::text, s.user_id, s.line "
              "FROM rc_import_stg s JOIN qualification q ON q.activity_id = $1::bigint AND q.user_id = s.user_id "
              "WHERE s.error IS NULL AND q.import_id IS DISTINCT FROM $2::text" + not_dup +
                  " ON CONFLICT DO NOTHING",
              ids);
    }
    counts_.rejected += dups;
    if (counts_.rejected > 0) write_rejects(tx, dups > 0);
    tx.exec_script(dups ? "DROP TABLE rc_import_dup; DROP TABLE rc_import_stg" : "DROP TABLE rc_import_stg");
    return counts_;
  }

 private:
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
        std::string why = row.is_null(2) ? (row.is_null(3) ? std::string("duplicate user_id: listed earlier in the file")
                                                          : "duplicate user_id: first listed on line " + row.str(3))
                                         : row.str(2);
        rejects_.add(row.i64(0), row.is_null(2) ? row.str_or(1, "") : unhex(row.str_or(1, "")), why);
      }
    }
    tx.exec_script("CLOSE rc_import_rej");
  }

  store::Store& store_;
  const Header& h_;
  RunIds ids_;
  RejectsWriter& rejects_;
  bool across_;
  Bloom bloom_;
  std::unique_ptr<store::BulkWriter> bulk_;
  std::vector<std::optional<std::string>> cells_;
  Counts counts_;
  int64_t valid_ = 0, flagged_ = 0;
};

}  // namespace

std::unique_ptr<Loader> make_pg_loader(store::Store& s, const Header& h, const RunIds& ids, RejectsWriter& rejects,
                                       bool across_batches, uint64_t expected_rows) {
  return std::make_unique<PgLoader>(s, h, ids, rejects, across_batches, expected_rows);
}

}  // namespace rc::jobs::import
