#include "util/csv_reader.hpp"

#include <csv.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.hpp"

namespace rc::csv {

namespace {
constexpr size_t kBufSize = 256 * 1024;
constexpr size_t kRawKeep = 64 * 1024;  // text kept of a malformed record, for the rejects file
// libcsv's parser states (csv.c); the header exposes the field but not the names.
constexpr int kRowNotBegun = 0;
constexpr int kFieldBegun = 2;
constexpr int kFieldMightHaveEnded = 3;
}  // namespace

// libcsv calls back with C linkage-compatible plain functions; these forward to the reader.
struct ReaderCallbacks {
  static void field(void* data, size_t len, void* self) {
    auto* r = static_cast<Reader*>(self);
    Record& c = r->cur_;
    if (r->cur_nfields_ < r->limits_.max_fields) {
      const char* d = static_cast<const char*>(data);
      if (r->cur_nfields_ < c.fields.size()) c.fields[r->cur_nfields_].assign(d, len);
      else c.fields.emplace_back(d, len);
      ++r->cur_nfields_;
    }
    ++c.field_count;
    r->cur_bytes_ += len;
    if (len > r->limits_.max_field_bytes && !r->long_field_) r->long_field_ = c.field_count;
    if (r->cur_bytes_ > r->limits_.max_record_bytes) r->too_big_ = true;
  }
  static void row(int, void* self) {
    auto* r = static_cast<Reader*>(self);
    r->end_record();
    r->record_start_ = r->line_;  // a further record on this line (CR line ends) starts here
  }
};

Reader::Reader(int fd, std::string name, Limits limits)
    : fd_(fd), name_(std::move(name)), limits_(limits), parser_(new csv_parser) {
  if (csv_init(parser_, CSV_STRICT) != 0) throw Error(Errc::internal, "csv_init failed");
  csv_set_blk_size(parser_, 4096);
  buf_.resize(kBufSize);
  off_t at = ::lseek(fd_, 0, SEEK_CUR);
  if (at > 0) start_ = uint64_t(at);
}

Reader::~Reader() {
  csv_free(parser_);
  delete parser_;
}

std::string Reader::where(int64_t line) const {
  return (name_ == "-" ? std::string("<stdin>") : name_) + ":" + std::to_string(line);
}

bool Reader::rewindable() const {
  struct stat sb;
  return ::fstat(fd_, &sb) == 0 && S_ISREG(sb.st_mode);
}

void Reader::reset_parser() {
  parser_->pstate = kRowNotBegun;
  parser_->quoted = 0;
  parser_->spaces = 0;
  parser_->entry_pos = 0;
  parser_->status = 0;
}

void Reader::rewind() {
  if (::lseek(fd_, off_t(start_), SEEK_SET) != off_t(start_)) throw Error(Errc::input_unreadable, "cannot rewind " + name_ + ": " + strerror(errno));
  reset_parser();
  pos_ = len_ = 0;
  eof_ = finished_ = skip_to_eol_ = false;
  at_start_ = true;
  bytes_read_ = 0;
  line_ = record_start_ = 1;
  cur_raw_.clear();
  ready_n_ = ready_pos_ = 0;
  cur_ = Record{};
  cur_nfields_ = cur_bytes_ = 0;
  too_big_ = false;
  long_field_ = 0;
}

bool Reader::fill() {
  if (eof_) return false;
  for (;;) {
    ssize_t n = ::read(fd_, buf_.data(), buf_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(Errc::input_unreadable, "cannot read " + name_ + ": " + strerror(errno));
    if (n == 0) {
      eof_ = true;
      return false;
    }
    if (tap_) tap_(buf_.data(), size_t(n));
    pos_ = 0;
    len_ = size_t(n);
    bytes_read_ += uint64_t(n);
    return true;
  }
}

void Reader::end_record() {
  cur_.fields.resize(cur_nfields_);
  cur_.line = record_start_;
  cur_.end_line = line_;
  if (!cur_.error.empty()) {
    cur_.raw = cur_raw_;
    while (!cur_.raw.empty() && (cur_.raw.back() == '\n' || cur_.raw.back() == '\r')) cur_.raw.pop_back();
  }
  if (ready_n_ == ready_.size()) ready_.emplace_back();
  std::swap(ready_[ready_n_++], cur_);
  cur_.field_count = 0;
  cur_.error.clear();
  cur_.raw.clear();
  cur_nfields_ = cur_bytes_ = 0;
}

void Reader::malformed(bool line_end) {
  size_t field = cur_nfields_ + 1;
  cur_.field_count = std::max(cur_.field_count, field);
  if (parser_->pstate == kFieldMightHaveEnded)
    cur_.error = "malformed quoting in field " + std::to_string(field) + ": text after the closing quote";
  else
    cur_.error = "malformed quoting in field " + std::to_string(field) + ": a quote inside an unquoted field";
  reset_parser();
  if (line_end) end_record();
  else skip_to_eol_ = true;
}

void Reader::feed(const char* p, size_t n, bool line_end) {
  if (parser_->pstate == kRowNotBegun) {
    record_start_ = line_;
    cur_raw_.clear();
  }
  if (cur_raw_.size() < kRawKeep) cur_raw_.append(p, std::min(n, kRawKeep - cur_raw_.size()));
  size_t done = csv_parse(parser_, p, n, &ReaderCallbacks::field, &ReaderCallbacks::row, this);
  if (done < n) {
    if (csv_error(parser_) != CSV_EPARSE)
      throw StructuralError(where(record_start_) + ": " + csv_strerror(csv_error(parser_)), record_start_);
    malformed(line_end);
    return;
  }
  if (too_big_)
    throw StructuralError(where(record_start_) + ": record longer than " + std::to_string(limits_.max_record_bytes) +
                              " bytes",
                          record_start_);
  if (long_field_ || parser_->entry_pos > limits_.max_field_bytes) {
    const bool quoted = !long_field_ && parser_->quoted != 0;
    size_t field = long_field_ ? long_field_ : cur_.field_count + 1;
    throw StructuralError(where(record_start_) + ": field " + std::to_string(field) + " is longer than " +
                              std::to_string(limits_.max_field_bytes) + " bytes" +
                              (quoted ? " (a quote opened here is probably never closed)" : ""),
                          record_start_);
  }
}

bool Reader::next(Record& r) {
  while (ready_pos_ == ready_n_) {
    ready_pos_ = ready_n_ = 0;
    if (finished_) return false;
    if (pos_ == len_ && !fill()) {
      finished_ = true;
      if (skip_to_eol_) {
        skip_to_eol_ = false;
        end_record();
        continue;
      }
      if (parser_->pstate == kFieldBegun && parser_->quoted)
        throw StructuralError(where(record_start_) + ": unterminated quoted field: the record that starts on line " +
                                  std::to_string(record_start_) + " is still inside quotes at the end of the input",
                              record_start_);
      csv_fini(parser_, &ReaderCallbacks::field, &ReaderCallbacks::row, this);
      continue;
    }
    if (at_start_) {
      at_start_ = false;
      if (len_ - pos_ < 3 && !eof_) {
        // a byte-order mark split across reads: only possible with tiny reads (pipes); top up
        std::string head(buf_.data() + pos_, len_ - pos_);
        while (head.size() < 3 && fill()) head.append(buf_.data(), len_);
        if (head.size() > buf_.size()) buf_.resize(head.size());
        std::copy(head.begin(), head.end(), buf_.begin());
        pos_ = 0;
        len_ = head.size();
      }
      if (len_ - pos_ >= 3 && memcmp(buf_.data() + pos_, "\xEF\xBB\xBF", 3) == 0) pos_ += 3;
      continue;
    }
    const char* p = buf_.data() + pos_;
    size_t avail = len_ - pos_;
    const char* nl = static_cast<const char*>(memchr(p, '\n', avail));
    size_t n = nl ? size_t(nl - p) + 1 : avail;
    pos_ += n;
    if (skip_to_eol_) {
      // the rest of a malformed record's line: kept for the rejects file, not parsed
      if (cur_raw_.size() < kRawKeep) cur_raw_.append(p, std::min(n, kRawKeep - cur_raw_.size()));
      if (nl) {
        skip_to_eol_ = false;
        end_record();
        ++line_;
      }
      continue;
    }
    feed(p, n, nl != nullptr);
    if (nl) ++line_;
  }
  std::swap(r, ready_[ready_pos_++]);
  return true;
}

void append_field(std::string& out, std::string_view f) {
  bool quote = !f.empty() && (f.front() == ' ' || f.front() == '\t' || f.back() == ' ' || f.back() == '\t');
  if (!quote)
    for (char c : f)
      if (c == ',' || c == '"' || c == '\r' || c == '\n') {
        quote = true;
        break;
      }
  if (!quote) {
    out.append(f);
    return;
  }
  out += '"';
  for (char c : f) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

std::string join_fields(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    append_field(out, fields[i]);
  }
  return out;
}

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* e = p + s.size();
  while (p < e) {
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07, min = 0x10000;
    else return false;
    if (e - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += n + 1;
  }
  return true;
}

}  // namespace rc::csv
