// SQLite loader: the write lock is held for the whole batch (BEGIN IMMEDIATE), so one prepared
// statement per row in one large transaction is the engine's fast path. Rows are buffered in a
// bounded chunk and inserted in user_id order: consecutive inserts then land on neighbouring pages of
// the unique index instead of all over it, which is most of an import's cost once the index
// outgrows the page cache. A duplicate is known the moment its insert conflicts; the chunk's rejects
// are written in line order.
#include <algorithm>

#include "jobs/import/load.hpp"

namespace rc::jobs::import {
namespace {

// INSERT of n rows: $1 activity, $2 source, $3 import id, $4 now, then (user_id, line, ext, expires_at)
// per row.
std::string insert_sql(size_t n) {
  std::string s =
      "INSERT INTO qualification (activity_id, user_id, status, source, import_id, import_line, ext, expires_at, "
      "created_at, updated_at) VALUES ";
  for (size_t i = 0; i < n; ++i) {
    auto p = [&](size_t k) { return "$" + std::to_string(5 + 4 * i + k); };
    s += std::string(i ? ", (" : "(") + "$1, " + p(0) + ", 'unused', $2, $3, " + p(1) + ", " + p(2) + ", " + p(3) +
         ", $4, $4)";
  }
  return s + " ON CONFLICT (activity_id, user_id) DO NOTHING";
}
const char* kOwner = "SELECT import_id, import_line FROM qualification WHERE activity_id = $1 AND user_id = $2";
const char* kSeen = "INSERT INTO import_seen (import_id, user_id, line) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";
const char* kSeenLine = "SELECT line FROM import_seen WHERE import_id = $1 AND user_id = $2";

constexpr size_t kChunkRows = 32768;
// Rows per INSERT statement: one statement's fixed cost (bind, step, reset) shared by many rows.
constexpr size_t kGroups[] = {64, 8, 1};
constexpr size_t kChunkBytes = 8 << 20;

struct Pending {
  int64_t line;
  std::string user_id, ext, text;  // text: the row for the rejects file
  std::optional<Millis> expires_at;
};
struct Rejected {
  int64_t line;
  std::string text, why;
};

class SqliteLoader : public Loader {
 public:
  SqliteLoader(const Header& h, const RunIds& ids, RejectsWriter& rejects) : h_(h), ids_(ids), rejects_(rejects) {
    for (size_t g : kGroups) sql_.push_back(insert_sql(g));
  }

  void begin(store::Tx& tx) override {
    if (!tuned_) {
      // SQLite's default page cache is 2 MB; a larger one keeps the upper levels of the unique
      // index resident (this connection only: the process ends with the import).
      tx.exec_script("PRAGMA cache_size = -16384");
      tuned_ = true;
    }
    tx_ = &tx;
    counts_ = {};
  }

  void row(const csv::Record& rec, const std::string& user_id, const std::string& ext,
           std::optional<Millis> expires_at) override {
    chunk_.push_back({rec.line, user_id, ext, reject_text(h_, rec), expires_at});
    bytes_ += user_id.size() + ext.size() + chunk_.back().text.size() + sizeof(Pending);
    if (chunk_.size() >= kChunkRows || bytes_ >= kChunkBytes) flush();
  }

  void reject(const csv::Record& rec, const std::string& why) override {
    rejected_.push_back({rec.line, reject_text(h_, rec), why});
    bytes_ += rejected_.back().text.size() + why.size() + sizeof(Rejected);
    if (bytes_ >= kChunkBytes) flush();
  }

  Counts finish(store::Tx&) override {
    flush();
    tx_ = nullptr;
    return counts_;
  }
  void skipped(const std::string&) override {}
  void abandon() override {
    counts_ = {};
    chunk_.clear();
    rejected_.clear();
    bytes_ = 0;
  }

 private:
  void flush() {
    // (user_id, line): of two rows for one user the earlier line is inserted first, so the later one
    // is the duplicate, as in file order.
    std::sort(chunk_.begin(), chunk_.end(), [](const Pending& a, const Pending& b) {
      return a.user_id != b.user_id ? a.user_id < b.user_id : a.line < b.line;
    });
    for (size_t i = 0; i < chunk_.size();) {
      size_t k = 0;
      while (kGroups[k] > chunk_.size() - i) ++k;
      insert(i, kGroups[k], sql_[k]);
      i += kGroups[k];
    }
    std::sort(rejected_.begin(), rejected_.end(), [](const Rejected& a, const Rejected& b) { return a.line < b.line; });
    for (auto& r : rejected_) rejects_.add(r.line, r.text, r.why);
    counts_.rejected += int64_t(rejected_.size());
    chunk_.clear();
    rejected_.clear();
    bytes_ = 0;
  }

  // Inserts chunk_[from, from + n). Rows that conflicted (fewer changes than rows) are told apart
  // one by one: inserted by this statement, a repeat of this import's earlier line, or qualified
  // before this import.
  void insert(size_t from, size_t n, const std::string& sql) {
    params_.assign({ids_.activity_id, ids_.source, ids_.import_id, ids_.now});
    for (size_t i = from; i < from + n; ++i) {
      const Pending& p = chunk_[i];
      params_.emplace_back(p.user_id);
      params_.emplace_back(p.line);
      params_.push_back(p.ext.empty() ? store::kNull : store::Value(p.ext));
      params_.push_back(p.expires_at ? store::Value(*p.expires_at) : store::kNull);
    }
    const int64_t changed = tx_->exec(sql, params_);
    counts_.inserted += changed;
    if (changed == int64_t(n)) return;
    for (size_t i = from; i < from + n; ++i) classify(chunk_[i]);
  }

  void classify(Pending& p) {
    auto own = tx_->query(kOwner, {ids_.activity_id, p.user_id});
    if (!own.empty()) {
      const std::string owner_import = own[0].str_or(0, "");
      const std::optional<int64_t> owner_line = own[0].opt_i64(1);
      if (owner_import == ids_.import_id) {
        if (owner_line != p.line) duplicate(p, owner_line);
        return;  // else: this very row, inserted by the statement
      }
    }
    if (tx_->exec(kSeen, {ids_.import_id, p.user_id, p.line}) == 1) {
      ++counts_.existing;
      return;
    }
    auto seen = tx_->query(kSeenLine, {ids_.import_id, p.user_id});
    duplicate(p, seen.empty() ? std::nullopt : seen[0].opt_i64(0));  // the line that listed it first
  }

  void duplicate(Pending& p, std::optional<int64_t> first) {
    rejected_.push_back({p.line, std::move(p.text),
                         first ? "duplicate user_id: first listed on line " + std::to_string(*first)
                               : std::string("duplicate user_id: listed earlier in the file")});
  }

  const Header& h_;
  RunIds ids_;
  RejectsWriter& rejects_;
  store::Tx* tx_ = nullptr;
  store::Params params_;
  std::vector<std::string> sql_;
  Counts counts_;
  bool tuned_ = false;
  std::vector<Pending> chunk_;
  std::vector<Rejected> rejected_;
  size_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<Loader> make_sqlite_loader(const Header& h, const RunIds& ids, RejectsWriter& rejects) {
  return std::make_unique<SqliteLoader>(h, ids, rejects);
}

}  // namespace rc::jobs::import
