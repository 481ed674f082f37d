#pragma once
// How the rows of one import batch reach the qualification table, per engine. Both give the same
// answer for every row: inserted (a new qualification), existing (the user was qualified before this
// import), or rejected (invalid, or a repeat of a user already accepted on an earlier line — then the
// reject names that line). The decision rests on UNIQUE (activity_id, user_id), never on a scan of
// the file held in memory.
#include <cstdint>
#include <memory>
#include <string>

#include "core/clock.hpp"
#include "core/store/store.hpp"
#include "jobs/import/rows.hpp"
#include "jobs/input/rejects_writer.hpp"
#include "util/csv_reader.hpp"

namespace rc::jobs::import {

struct RunIds {
  int64_t activity_id = 0;
  std::string import_id;
  std::string source;
  Millis now = 0;
};

struct Counts {
  int64_t read = 0, inserted = 0, existing = 0, rejected = 0;
  Counts& operator+=(const Counts& o) {
    read += o.read, inserted += o.inserted, existing += o.existing, rejected += o.rejected;
    return *this;
  }
};

class Loader {
 public:
  virtual ~Loader() = default;
  // Starts a batch in tx.
  virtual void begin(store::Tx& tx) = 0;
  // A valid row (user_id trimmed, ext JSON or "", expires_at or none).
  virtual void row(const csv::Record& rec, const std::string& user_id, const std::string& ext,
                   std::optional<Millis> expires_at) = 0;
  // A row that failed the row rules.
  virtual void reject(const csv::Record& rec, const std::string& why) = 0;
  // Applies the batch in tx and writes its rejects (in line order within the batch) to the rejects
  // file. Returns the batch's inserted/existing/rejected (read is the caller's).
  virtual Counts finish(store::Tx& tx) = 0;
  // A valid row of the part of the file an earlier run committed (resume): not loaded again, but a
  // later repeat of it must still be found.
  virtual void skipped(const std::string& user_id) = 0;
  // The batch is being retried from its start (the transaction was rolled back).
  virtual void abandon() = 0;
};

// across_batches: the run commits in several transactions (or resumes one), so a repeat may refer
// to a row an earlier batch committed.
// PostgreSQL: COPY into a TEMP staging table, duplicates found in SQL among the rows a Bloom filter
// flags, then one INSERT ... SELECT ... ON CONFLICT DO NOTHING.
std::unique_ptr<Loader> make_pg_loader(store::Store& s, const Header& h, const RunIds& ids, RejectsWriter& rejects,
                                       bool across_batches, uint64_t expected_rows);
// SQLite: one prepared INSERT ... ON CONFLICT DO NOTHING per row; a conflict is told apart (this
// import's earlier line, or a user qualified before) with an index lookup.
std::unique_ptr<Loader> make_sqlite_loader(const Header& h, const RunIds& ids, RejectsWriter& rejects);

}  // namespace rc::jobs::import
