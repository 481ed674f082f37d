#include "jobs/input/rejects_writer.hpp"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "base/error.hpp"
#include "util/csv_reader.hpp"

namespace rc::jobs::import {

RejectsWriter::RejectsWriter(std::string path, std::string header_text, bool enabled)
    : path_(std::move(path)), header_(std::move(header_text)), enabled_(enabled) {}

RejectsWriter::~RejectsWriter() {
  if (f_) fclose(f_);
}

void RejectsWriter::open() {
  f_ = fopen(path_.c_str(), "w");
  if (!f_) throw Error(Errc::output_failed, "cannot write the rejects file " + path_ + ": " + strerror(errno));
  fputs((header_ + ",_line,_error\n").c_str(), f_);
}

void RejectsWriter::add(int64_t line, const std::string& text, const std::string& error) {
  ++written_;
  if (!enabled_) return;
  if (!f_) open();
  std::string row = text;
  row += ',';
  row += std::to_string(line);
  row += ',';
  csv::append_field(row, error);
  row += '\n';
  if (fwrite(row.data(), 1, row.size(), f_) != row.size())
    throw Error(Errc::output_failed, "cannot write the rejects file " + path_ + ": " + strerror(errno));
}

uint64_t RejectsWriter::flush() {
  if (!f_) return 0;
  if (fflush(f_) != 0) throw Error(Errc::output_failed, "cannot write the rejects file " + path_ + ": " + strerror(errno));
  return uint64_t(ftell(f_));
}

void RejectsWriter::truncate_to(uint64_t length) {
  if (!f_) return;
  fflush(f_);
  if (length == 0) {
    fclose(f_);
    f_ = nullptr;
    unlink(path_.c_str());
    written_ = 0;
    return;
  }
  if (ftruncate(fileno(f_), off_t(length)) != 0 || fseek(f_, long(length), SEEK_SET) != 0)
    throw Error(Errc::output_failed, "cannot truncate the rejects file " + path_ + ": " + strerror(errno));
}

bool RejectsWriter::resume(uint64_t length) {
  if (!enabled_ || length == 0) return true;
  f_ = fopen(path_.c_str(), "r+");
  if (!f_) {
    open();
    return false;
  }
  struct stat sb;
  bool whole = fstat(fileno(f_), &sb) == 0 && uint64_t(sb.st_size) >= length;
  if (whole) truncate_to(length);
  else fseek(f_, 0, SEEK_END);
  written_ = 1;
  return whole;
}

void RejectsWriter::remove_stale() {
  if (!enabled_ || written_ > 0 || f_) return;
  std::ifstream in(path_);
  std::string first;
  if (!in || !std::getline(in, first)) return;
  const std::string tail = ",_line,_error";
  if (first.size() >= tail.size() && first.compare(first.size() - tail.size(), tail.size(), tail) == 0)
    unlink(path_.c_str());
}

}  // namespace rc::jobs::import
