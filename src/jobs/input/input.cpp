#include "jobs/input/input.hpp"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.hpp"

namespace rc::jobs::import {

Input::~Input() {
  if (owned && fd >= 0) close(fd);
}

std::unique_ptr<Input> open_input(const std::string& file) {
  auto in = std::make_unique<Input>();
  in->file = file;
  if (file == "-") {
    in->fd = STDIN_FILENO;
  } else {
    in->fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (in->fd < 0) throw Error(Errc::input_unreadable, "cannot open " + file + ": " + strerror(errno));
    in->owned = true;
  }
  struct stat sb;
  if (fstat(in->fd, &sb) == 0) {
    if (S_ISDIR(sb.st_mode)) throw Error(Errc::input_unreadable, "cannot read " + file + ": it is a directory");
    if (S_ISREG(sb.st_mode)) in->size = uint64_t(sb.st_size);
  }
  in->reader = std::make_unique<csv::Reader>(in->fd, file);
  return in;
}

std::string default_rejects_path(const std::string& file) {
  return file == "-" ? "stdin.rejects.csv" : file + ".rejects.csv";
}

}  // namespace rc::jobs::import
