#include "util/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.hpp"

namespace rc::util {

void write_file_atomic(const std::string& path, const std::string& text) {
  // Only a regular file is replaced: renaming over a device, a FIFO or a symlink (/dev/stdout, a
  // link into someone else's directory) would destroy it instead of writing to it.
  mode_t mode = 0644;
  struct stat sb;
  if (::lstat(path.c_str(), &sb) == 0) {
    if (!S_ISREG(sb.st_mode))
      throw Error(Errc::output_failed, "cannot write " + path + ": it exists and is not a regular file (a directory, "
                                       "device, FIFO or symlink); name a new or regular file");
    mode = sb.st_mode & 07777;
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // a leftover of a killed run of this pid; O_EXCL below refuses anything planted since
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) throw Error(Errc::output_failed, "cannot write " + tmp + ": " + std::strerror(errno));
  ::fchmod(fd, mode);  // the umask must not change an existing file's mode
  auto fail = [&](const std::string& what) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(Errc::output_failed, what + ": " + std::strerror(e));
  };
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write " + tmp);
    }
    off += size_t(n);
  }
  if (::fsync(fd) != 0) fail("cannot write " + tmp);
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error(Errc::output_failed, "cannot write " + tmp + ": " + std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error(Errc::output_failed, "cannot rename " + tmp + " to " + path + ": " + std::strerror(e));
  }
}

}  // namespace rc::util
