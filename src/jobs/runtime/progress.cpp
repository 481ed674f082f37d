#include "jobs/runtime/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>

#include "base/error.hpp"

namespace rc::jobs {

ProgressMode progress_mode(const std::string& flag, bool quiet) {
  if (flag != "auto" && flag != "tty" && flag != "plain" && flag != "none")
    throw Error(Errc::usage, "--progress must be auto, tty, plain or none, not '" + flag + "'");
  if (quiet || flag == "none") return ProgressMode::none;
  if (flag == "tty") return ProgressMode::tty;
  if (flag == "plain") return ProgressMode::plain;
  return isatty(STDERR_FILENO) ? ProgressMode::tty : ProgressMode::plain;
}

std::string group_thousands(int64_t n) {
  std::string d = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return n < 0 ? "-" + out : out;
}

namespace {
std::string clock_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  auto t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600) snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60),
                          (long long)(t % 60));
  else snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(t / 60), (long long)(t % 60));
  return buf;
}
}  // namespace

Progress::Progress(ProgressMode mode, std::string label, uint64_t total_work, std::string unit, std::FILE* out,
                   Now now, double plain_every_s)
    : mode_(mode), label_(std::move(label)), unit_(std::move(unit)), total_(total_work), out_(out),
      now_(std::move(now)), every_s_(plain_every_s) {
  start_ = last_draw_ = this->now();
}

Progress::~Progress() { finish(); }

double Progress::now() const {
  if (now_) return now_();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string Progress::line(int64_t items, uint64_t work, double elapsed) const {
  double rate = elapsed > 0 ? double(items) / elapsed : 0;
  std::string s = label_ + ": " + group_thousands(items) + " " + unit_;
  if (total_ > 0) {
    double frac = std::min(1.0, double(work) / double(total_));
    s += " (" + std::to_string(int(frac * 100)) + "%)";
  }
  s += ", " + group_thousands(int64_t(rate)) + " " + unit_ + "/s";
  if (!phase_.empty()) {
    s += ", " + phase_;
  } else if (total_ > 0 && work > 0 && elapsed > 0) {
    double work_rate = double(work) / elapsed;
    s += ", ETA " + clock_text(double(total_ - std::min(work, total_)) / work_rate);
  }
  return s;
}

void Progress::update(int64_t items, uint64_t work) {
  items_ = items;
  work_ = work;
  if (mode_ == ProgressMode::none || (++calls_ & 255) != 0) return;
  draw(false);
}

void Progress::phase(const std::string& what) {
  phase_ = what;
  // a terminal shows the step at once; a log gets it with the next periodic line
  if (mode_ == ProgressMode::tty) draw(true);
  else if (mode_ == ProgressMode::plain) draw(false);
}

void Progress::draw(bool force) {
  double t = now();
  double every = mode_ == ProgressMode::tty ? 0.1 : every_s_;
  if (!force && t - last_draw_ < every) return;
  if (mode_ == ProgressMode::plain && !force && t - start_ < every_s_) return;
  last_draw_ = t;
  std::string text = line(items_, work_, t - start_);
  if (mode_ == ProgressMode::tty) {
    std::string bar;
    if (total_ > 0) {
      const int width = 24;
      int filled = int(std::min(1.0, double(work_) / double(total_)) * width);
      bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
    }
    fprintf(out_, "\r%s%s\x1b[K", bar.c_str(), text.c_str());
  } else {
    fprintf(out_, "%s\n", text.c_str());
  }
  fflush(out_);
  drawn_ = true;
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (mode_ == ProgressMode::tty && drawn_) {
    fprintf(out_, "\r\x1b[K");
    fflush(out_);
  }
}

}  // namespace rc::jobs
