#pragma once
// Writing a whole output file so that a reader sees the old content or the new, never half of it:
// the text goes to "<path>.tmp.<pid>" in the same directory, is fsync'ed, and renamed over path.
// Error(cant_create) (exit 73) naming the file and the system's reason when any step fails; the
// temporary file is removed then. A path that exists and is not a regular file (a directory, a
// device such as /dev/stdout, a FIFO, a symlink) is refused, not replaced; an existing file keeps
// its mode.
#include <string>

namespace rc::util {

void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace rc::util
