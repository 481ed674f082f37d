#include "jobs/runtime/metrics.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "jobs/runtime/runner.hpp"
#include "util/atomic_file.hpp"
#include "util/prometheus.hpp"

namespace rc::jobs {
namespace {

struct Family {
  const char* name;
  const char* help;
};
const Family kFamilies[] = {
    {"rewardctl_job_last_run_timestamp_seconds", "End of the job's last run (Unix time)."},
    {"rewardctl_job_last_success_timestamp_seconds", "End of the job's last run that finished (Unix time)."},
    {"rewardctl_job_last_duration_seconds", "Duration of the job's last run."},
    {"rewardctl_job_last_exit_code", "Exit code of the job's last run (0 ok, 75 lease held, 130 interrupted)."},
    {"rewardctl_job_last_items", "Items per outcome in the job's last run."},
};

// Label values escape backslash, double quote and newline.
std::string esc(const std::string& v) { return prometheus_label(v); }

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// sample lines per family name, comments dropped
std::map<std::string, std::vector<std::string>> samples_of(const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) {
    if (l.empty() || l[0] == '#') continue;
    auto e = l.find_first_of("{ ");
    out[l.substr(0, e)].push_back(l);
  }
  return out;
}

bool of_job(const std::string& line, const std::string& job) {
  return line.find("job=\"" + esc(job) + "\"") != std::string::npos;
}

}  // namespace

std::string metrics_without_job(const std::string& text, const std::string& job) {
  std::string o;
  for (auto& [fam, lines] : samples_of(text))
    for (auto& l : lines)
      if (!of_job(l, job)) o += l + "\n";
  return o;
}

void write_metrics(const std::string& path, const JobReport& r, Millis now) {
  const std::string lock = path + ".lock";
  int lfd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lfd < 0) throw Error(Errc::output_failed, "cannot open " + lock + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{lfd};
  if (::flock(lfd, LOCK_EX) != 0) throw Error(Errc::output_failed, "cannot lock " + lock + ": " + std::strerror(errno));

  std::string old;
  {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    old = ss.str();
  }
  auto samples = samples_of(old);
  const std::string j = "job=\"" + esc(r.job) + "\"";
  // the last success survives a failed or interrupted run
  std::string last_success;
  for (auto& l : samples["rewardctl_job_last_success_timestamp_seconds"])
    if (of_job(l, r.job)) last_success = l;
  for (auto& [fam, lines] : samples) {
    std::vector<std::string> keep;
    for (auto& l : lines)
      if (!of_job(l, r.job)) keep.push_back(l);
    lines = keep;
  }
  const double t = double(now) / 1000.0;
  samples["rewardctl_job_last_run_timestamp_seconds"].push_back("rewardctl_job_last_run_timestamp_seconds{" + j + "} " + num(t));
  if (r.state == "done")
    last_success = "rewardctl_job_last_success_timestamp_seconds{" + j + "} " + num(t);
  if (!last_success.empty()) samples["rewardctl_job_last_success_timestamp_seconds"].push_back(last_success);
  samples["rewardctl_job_last_duration_seconds"].push_back("rewardctl_job_last_duration_seconds{" + j + "} " +
                                                           num(r.seconds));
  samples["rewardctl_job_last_exit_code"].push_back("rewardctl_job_last_exit_code{" + j + "} " +
                                                    std::to_string(exit_int(r.exit)));
  for (auto& [outcome, n] : r.counts)
    samples["rewardctl_job_last_items"].push_back("rewardctl_job_last_items{" + j + ",outcome=\"" + esc(outcome) +
                                                  "\"} " + std::to_string(n));

  std::string text;
  for (auto& f : kFamilies) {
    auto& lines = samples[f.name];
    if (lines.empty()) continue;
    text += std::string("# HELP ") + f.name + " " + f.help + "\n# TYPE " + f.name + " gauge\n";
    for (auto& l : lines) text += l + "\n";
  }

  util::write_file_atomic(path, text);
}

}  // namespace rc::jobs
