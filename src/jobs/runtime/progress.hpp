#pragma once
// Progress of a long batch (import-qualifications, list-issue) on standard error, never stdout:
// on a terminal a bar redrawn in place with items, items/s and ETA; otherwise (cron, CI logs) a plain
// line every few seconds; nothing with --quiet. The work measure behind the ETA is up to the job:
// bytes of the input file for an import, items for a batch whose size is known.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace rc::jobs {

enum class ProgressMode { none, plain, tty };

// Resolves --progress auto|tty|plain|none. auto: tty when stderr is a terminal, else plain.
// quiet wins over everything. Throws Error(usage) for another value.
ProgressMode progress_mode(const std::string& flag, bool quiet);

class Progress {
 public:
  using Now = std::function<double()>;  // monotonic seconds; empty = steady_clock

  // total_work 0 = unknown (no percentage, no ETA). unit names the items ("rows", "users").
  Progress(ProgressMode mode, std::string label, uint64_t total_work = 0, std::string unit = "rows",
           std::FILE* out = stderr, Now now = {}, double plain_every_s = 5.0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Cheap enough to call for every item: it looks at the clock every few hundred calls.
  void update(int64_t items, uint64_t work);
  // A step after the streaming part ("inserting", "committing"): shown at once.
  void phase(const std::string& what);
  // Ends the display (a terminal line is cleared so the summary that follows starts clean).
  void finish();

  ProgressMode mode() const { return mode_; }
  // The text of one update as it would be shown (no \r or escape codes); for tests and logs.
  std::string line(int64_t items, uint64_t work, double elapsed_s) const;

 private:
  void draw(bool force);
  double now() const;

  ProgressMode mode_;
  std::string label_, unit_, phase_;
  uint64_t total_;
  std::FILE* out_;
  Now now_;
  double every_s_;
  double start_ = 0, last_draw_ = 0;
  int64_t items_ = 0;
  uint64_t work_ = 0;
  unsigned calls_ = 0;
  bool drawn_ = false, finished_ = false;
};

// 1234567 -> "1,234,567"
std::string group_thousands(int64_t n);

}  // namespace rc::jobs
