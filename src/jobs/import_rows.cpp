#include "jobs/import_rows.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string_view>

#include "core/error.hpp"

namespace rc::jobs::import {

namespace {

bool ignored_column(const std::string& n) { return n == "_line" || n == "_error"; }

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

// Length of a trimmable space at the start (front) or end of s[b, e), 0 when none.
size_t space_at(const std::string& s, size_t b, size_t e, bool front) {
  static const std::string_view kSpaces[] = {"\xC2\xA0", "\xE3\x80\x80", "\xEF\xBB\xBF"};
  char c = front ? s[b] : s[e - 1];
  if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f') return 1;
  std::string_view v(s.data() + b, e - b);
  for (auto sp : kSpaces) {
    if (v.size() < sp.size()) continue;
    if (front ? v.substr(0, sp.size()) == sp : v.substr(v.size() - sp.size()) == sp) return sp.size();
  }
  return 0;
}

}  // namespace

std::string trim_user_id(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e) {
    size_t n = space_at(s, b, e, true);
    if (!n) break;
    b += n;
  }
  while (e > b) {
    size_t n = space_at(s, b, e, false);
    if (!n) break;
    e -= n;
  }
  return s.substr(b, e - b);
}

std::string check_user_id(const std::string& id) {
  if (id.empty()) return "user_id is empty";
  if (id.size() > kMaxUserIdBytes)
    return "user_id is " + std::to_string(id.size()) + " bytes, at most " + std::to_string(kMaxUserIdBytes);
  if (!csv::valid_utf8(id)) return "user_id is not valid UTF-8";
  for (size_t i = 0; i < id.size(); ++i) {
    auto c = static_cast<unsigned char>(id[i]);
    bool c1 = c == 0xC2 && i + 1 < id.size() && static_cast<unsigned char>(id[i + 1]) < 0xA0;  // U+0080..U+009F
    if (c < 0x20 || c == 0x7F || c1) return "user_id holds a control character";
  }
  return "";
}

Header read_header(csv::Reader& reader) {
  csv::Record rec;
  if (!reader.next(rec))
    throw Error(Exit::data, reader.where(1) + ": the file is empty: expected a header row naming a user_id column");
  Header h;
  h.line = rec.line;
  auto fail = [&](const std::string& why) { throw Error(Exit::data, reader.where(rec.line) + ": header: " + why); };
  if (!rec.error.empty()) fail(rec.error);
  if (rec.fields.size() < rec.field_count) fail("too many columns");
  bool found = false;
  for (size_t i = 0; i < rec.fields.size(); ++i) {
    std::string n = trim_user_id(rec.fields[i]);
    if (n.empty()) fail("column " + std::to_string(i + 1) + " has no name");
    if (!csv::valid_utf8(n) || memchr(n.data(), 0, n.size())) fail("column " + std::to_string(i + 1) + " is not valid UTF-8 text");
    for (auto& prev : h.names)
      if (prev == n) fail("column '" + n + "' is named twice");
    if (n == "user_id") {
      h.user_col = i;
      found = true;
    } else if (!ignored_column(n)) {
      h.ext_cols.push_back(i);
    }
    h.names.push_back(n);
  }
  if (!found) fail("no user_id column (the columns are: " + csv::join_fields(h.names) + ")");
  return h;
}

std::string check_row(const Header& h, const csv::Record& rec, std::string& user_id, std::string& ext) {
  if (!rec.error.empty()) return rec.error;
  if (rec.field_count != h.names.size())
    return std::to_string(rec.field_count) + (rec.field_count == 1 ? " field" : " fields") + ", the header has " +
           std::to_string(h.names.size()) + (rec.field_count > h.names.size() ? " (extra columns)" : " (missing columns)");
  for (size_t i = 0; i < rec.fields.size(); ++i) {
    const std::string& f = rec.fields[i];
    const std::string what = i == h.user_col ? std::string("user_id") : "field '" + h.names[i] + "'";
    if (memchr(f.data(), 0, f.size())) return what + " holds a NUL byte";
    if (!csv::valid_utf8(f)) return what + " is not valid UTF-8";
  }
  user_id = trim_user_id(rec.fields[h.user_col]);
  std::string why = check_user_id(user_id);
  if (!why.empty()) return why;
  ext.clear();
  if (!h.ext_cols.empty()) {
    ext += '{';
    for (size_t k = 0; k < h.ext_cols.size(); ++k) {
      if (k) ext += ',';
      json_string(ext, h.names[h.ext_cols[k]]);
      ext += ':';
      json_string(ext, rec.fields[h.ext_cols[k]]);
    }
    ext += '}';
  }
  return "";
}

std::string reject_text(const Header& h, const csv::Record& rec) {
  std::string out;
  bool first = true;
  for (size_t i = 0; i < h.names.size(); ++i) {
    if (ignored_column(h.names[i])) continue;
    if (!first) out += ',';
    first = false;
    if (!rec.error.empty()) {
      if (i == 0) csv::append_field(out, rec.raw);
      continue;
    }
    if (i < rec.fields.size()) csv::append_field(out, rec.fields[i]);
  }
  return out;
}

RejectLimit RejectLimit::parse(const std::string& s) {
  RejectLimit l;
  auto bad = [&] {
    return Error(Exit::usage, "--max-rejects must be a count (10) or a percentage of the rows read (0.5%), not '" + s + "'");
  };
  if (s.empty()) throw bad();
  if (s.back() == '%') {
    std::string num = s.substr(0, s.size() - 1);
    char* end = nullptr;
    double p = std::strtod(num.c_str(), &end);
    if (num.empty() || *end || !(p >= 0 && p <= 100)) throw bad();
    l.percent = p;
    return l;
  }
  for (char c : s)
    if (c < '0' || c > '9') throw bad();
  if (s.size() > 18) throw bad();
  l.count = std::stoll(s);
  return l;
}

bool RejectLimit::over(int64_t rejected, int64_t read) const {
  if (percent < 0) return rejected > count;
  return double(rejected) * 100.0 > percent * double(read) + 1e-9;
}

std::string RejectLimit::text() const {
  if (percent < 0) return std::to_string(count);
  char buf[32];
  snprintf(buf, sizeof buf, "%g%%", percent);
  return buf;
}

RejectsWriter::RejectsWriter(std::string path, std::string header_text, bool enabled)
    : path_(std::move(path)), header_(std::move(header_text)), enabled_(enabled) {}

RejectsWriter::~RejectsWriter() {
  if (f_) fclose(f_);
}

void RejectsWriter::open() {
  f_ = fopen(path_.c_str(), "w");
  if (!f_) throw Error(Exit::no_input, "cannot write the rejects file " + path_ + ": " + strerror(errno));
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
    throw Error(Exit::no_input, "cannot write the rejects file " + path_ + ": " + strerror(errno));
}

uint64_t RejectsWriter::flush() {
  if (!f_) return 0;
  if (fflush(f_) != 0) throw Error(Exit::no_input, "cannot write the rejects file " + path_ + ": " + strerror(errno));
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
    throw Error(Exit::no_input, "cannot truncate the rejects file " + path_ + ": " + strerror(errno));
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

Bloom::Bloom(uint64_t expected_items) {
  uint64_t want = expected_items * 10, bits = uint64_t(8) << 20;  // 10 bits an item: ~1% false positives
  while (bits < want && bits < (uint64_t(256) << 20)) bits <<= 1;
  mask_ = bits - 1;
  // calloc: fresh zero pages from the kernel, resident only once touched
  bits_ = static_cast<uint64_t*>(calloc(bits / 64, sizeof(uint64_t)));
  if (!bits_) throw Error(Exit::internal, "out of memory for the duplicate filter");
}

Bloom::~Bloom() { free(bits_); }

bool Bloom::test_and_add(const std::string& key) {
  uint64_t h = std::hash<std::string_view>{}(key);
  uint64_t h2 = h * 0x9E3779B97F4A7C15ull;
  h2 ^= h2 >> 29;
  h2 |= 1;
  bool seen = true;
  for (int i = 0; i < 7; ++i) {
    uint64_t b = (h + uint64_t(i) * h2) & mask_;
    uint64_t bit = uint64_t(1) << (b & 63);
    uint64_t& w = bits_[b >> 6];
    if (!(w & bit)) {
      seen = false;
      w |= bit;
    }
  }
  return seen;
}

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
    if (in->fd < 0) throw Error(Exit::no_input, "cannot open " + file + ": " + strerror(errno));
    in->owned = true;
  }
  struct stat sb;
  if (fstat(in->fd, &sb) == 0) {
    if (S_ISDIR(sb.st_mode)) throw Error(Exit::no_input, "cannot read " + file + ": it is a directory");
    if (S_ISREG(sb.st_mode)) in->size = uint64_t(sb.st_size);
  }
  in->reader = std::make_unique<csv::Reader>(in->fd, file);
  return in;
}

std::string default_rejects_path(const std::string& file) {
  return file == "-" ? "stdin.rejects.csv" : file + ".rejects.csv";
}

int64_t find_activity(store::Store& s, const std::string& code) {
  auto r = s.query("SELECT id FROM activity WHERE code = $1", {code});
  if (r.empty()) throw Error(Exit::data, "no activity '" + code + "' (see rewardctl activity list)");
  return r[0].i64(0);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { reset(); }
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }
void Sha256::reset() { EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr); }
void Sha256::update(const char* p, size_t n) { EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), p, n); }
std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  EVP_MD_CTX_copy_ex(copy, static_cast<EVP_MD_CTX*>(ctx_));
  EVP_DigestFinal_ex(copy, md, &n);
  EVP_MD_CTX_free(copy);
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out += d[md[i] >> 4];
    out += d[md[i] & 15];
  }
  return out;
}

std::string sha256_fd(int fd, uint64_t from, const std::string& name) {
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (off_t off = off_t(from);;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(Exit::no_input, "cannot read " + name + ": " + strerror(errno));
    if (n == 0) break;
    h.update(buf.data(), size_t(n));
    off += n;
  }
  return h.hex();
}

}  // namespace rc::jobs::import
