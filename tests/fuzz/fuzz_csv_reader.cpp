// libFuzzer target for util/csv_reader: any byte string must either parse into records whose
// physical lines make sense, or fail with a StructuralError — never crash, hang, leak or exceed its
// memory limits. Fields written back with append_field must read back identically.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "util/csv_reader.hpp"

namespace {

int memfd_with(const uint8_t* data, size_t size) {
  int fd = memfd_create("fuzz", 0);
  if (fd < 0) abort();
  if (size && write(fd, data, size) != ssize_t(size)) abort();
  lseek(fd, 0, SEEK_SET);
  return fd;
}

// An invariant that failed is named before the abort, so a crash file is easy to read.
#define check(ok)                                                             \
  do {                                                                        \
    if (!(ok)) {                                                              \
      fprintf(stderr, "fuzz_csv_reader: invariant failed: %s (line %d)\n", #ok, __LINE__); \
      abort();                                                                \
    }                                                                         \
  } while (0)

std::vector<rc::csv::Record> parse(const std::string& text, const rc::csv::Limits& limits) {
  int fd = memfd_with(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  rc::csv::Reader r(fd, "roundtrip", limits);
  std::vector<rc::csv::Record> out;
  rc::csv::Record rec;
  while (r.next(rec)) out.push_back(rec);
  close(fd);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rc::csv::Limits limits;
  limits.max_field_bytes = 4096;  // small, so the fuzzer reaches the limits
  limits.max_record_bytes = 16384;
  limits.max_fields = 64;
  int64_t newlines = 0;
  for (size_t i = 0; i < size; ++i) newlines += data[i] == '\n';

  int fd = memfd_with(data, size);
  rc::csv::Reader reader(fd, "fuzz", limits);
  rc::csv::Record rec;
  int64_t last_line = 0;
  try {
    while (reader.next(rec)) {
      check(rec.line >= 1 && rec.line <= newlines + 1);
      check(rec.end_line >= rec.line && rec.end_line <= newlines + 1);
      check(rec.line >= last_line);
      last_line = rec.line;
      check(rec.fields.size() <= limits.max_fields && rec.fields.size() <= rec.field_count);
      if (!rec.error.empty()) continue;
      check(rec.fields.size() == std::min(rec.field_count, limits.max_fields));
      if (rec.fields.size() < rec.field_count) continue;  // fields over the limit are counted, not kept
      for (auto& f : rec.fields) check(f.size() <= limits.max_field_bytes);
      // what the rejects file would hold reads back as the same fields
      // (after a first line, as in a rejects file: a leading byte-order mark would be taken as one)
      std::string line = "h\n" + rc::csv::join_fields(rec.fields) + "\n";
      bool blank = rec.fields.size() == 1 && rec.fields[0].empty();
      if (blank) continue;  // an empty record is a blank line once written
      rc::csv::Limits roomy = limits;
      roomy.max_record_bytes = 1 << 20;
      auto back = parse(line, roomy);
      check(back.size() == 2 && back[1].error.empty() && back[1].fields == rec.fields);
    }
    check(reader.bytes_read() == size);
  } catch (const rc::csv::StructuralError& e) {
    check(e.line() >= 1 && e.line() <= newlines + 1);
  }
  close(fd);
  (void)rc::csv::valid_utf8(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
