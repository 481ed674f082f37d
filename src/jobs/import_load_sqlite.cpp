// SQLite loader: the write lock is held for the whole batch (BEGIN IMMEDIATE), so one prepared
// statement per row in one large transaction is the engine's fast path; a duplicate is known the
// moment its insert conflicts, which keeps the rejects file in line order.
#include "jobs/import_load.hpp"

namespace rc::jobs::import {
namespace {

const char* kInsert =
    "INSERT INTO qualification (activity_id, user_id, status, source, import_id, import_line, ext, created_at, "
    "updated_at) VALUES ($1, $2, 'unused', $3, $4, $5, $6, $7, $7) ON CONFLICT (activity_id, user_id) DO NOTHING";
const char* kOwner = "SELECT import_id, import_line FROM qualification WHERE activity_id = $1 AND user_id = $2";
const char* kSeen = "INSERT INTO import_seen (import_id, user_id, line) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";
const char* kSeenLine = "SELECT line FROM import_seen WHERE import_id = $1 AND user_id = $2";

class SqliteLoader : public Loader {
 public:
  SqliteLoader(const Header& h, const RunIds& ids, RejectsWriter& rejects) : h_(h), ids_(ids), rejects_(rejects) {
    params_.resize(7);
    params_[0] = ids_.activity_id;
    params_[2] = ids_.source;
    params_[3] = ids_.import_id;
    params_[6] = ids_.now;
  }

  void begin(store::Tx& tx) override {
    tx_ = &tx;
    counts_ = {};
  }

  void row(const csv::Record& rec, const std::string& user_id, const std::string& ext) override {
    params_[1] = user_id;
    params_[4] = rec.line;
    params_[5] = ext.empty() ? store::kNull : store::Value(ext);
    if (tx_->exec(kInsert, params_) == 1) {
      ++counts_.inserted;
      return;
    }
    // The user is qualified already: by an earlier line of this import (a repeat), or before it.
    auto own = tx_->query(kOwner, {ids_.activity_id, user_id});
    if (!own.empty() && own[0].str_or(0, "") == ids_.import_id) {
      duplicate(rec, own[0].opt_i64(1));
      return;
    }
    if (tx_->exec(kSeen, {ids_.import_id, user_id, rec.line}) == 1) {
      ++counts_.existing;
      return;
    }
    auto seen = tx_->query(kSeenLine, {ids_.import_id, user_id});
    duplicate(rec, seen.empty() ? std::nullopt : seen[0].opt_i64(0));
  }

  void reject(const csv::Record& rec, const std::string& why) override {
    rejects_.add(rec.line, reject_text(h_, rec), why);
    ++counts_.rejected;
  }

  Counts finish(store::Tx&) override {
    tx_ = nullptr;
    return counts_;
  }
  void skipped(const std::string&) override {}
  void abandon() override { counts_ = {}; }

 private:
  void duplicate(const csv::Record& rec, std::optional<int64_t> first) {
    reject(rec, first ? "duplicate user_id: first listed on line " + std::to_string(*first)
                      : std::string("duplicate user_id: listed earlier in the file"));
  }

  const Header& h_;
  RunIds ids_;
  RejectsWriter& rejects_;
  store::Tx* tx_ = nullptr;
  store::Params params_;
  Counts counts_;
};

}  // namespace

std::unique_ptr<Loader> make_sqlite_loader(const Header& h, const RunIds& ids, RejectsWriter& rejects) {
  return std::make_unique<SqliteLoader>(h, ids, rejects);
}

}  // namespace rc::jobs::import
