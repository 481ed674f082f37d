#include "cli/output.hpp"

#include <cstdio>
#include <cwchar>
#include <iostream>
#include <string_view>

namespace rc::cli {

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string cell_text(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return printable(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  return printable(dump_json(v));
}

// Walks UTF-8 text one character at a time with the C library (the process runs with a UTF-8
// LC_CTYPE, set in main). f(bytes, wide char or WEOF for a byte that is not valid UTF-8).
template <class F>
static void each_char(const std::string& s, F f) {
  std::mbstate_t st{};
  for (size_t i = 0; i < s.size();) {
    wchar_t wc = 0;
    size_t n = std::mbrtowc(&wc, s.data() + i, s.size() - i, &st);
    if (n == size_t(-1) || n == size_t(-2) || n == 0) {
      st = std::mbstate_t{};
      f(std::string_view(s.data() + i, 1), WEOF);
      ++i;
      continue;
    }
    f(std::string_view(s.data() + i, n), wint_t(wc));
    i += n;
  }
}

std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  char buf[16];
  each_char(s, [&](std::string_view bytes, wint_t wc) {
    if (wc == WEOF) {
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(static_cast<unsigned char>(bytes[0])));
      out += buf;
    } else if (wc == L'\n') {
      out += "\\n";
    } else if (wc == L'\t') {
      out += "\\t";
    } else if (wc == L'\r') {
      out += "\\r";
    } else if (wc < 0x20 || wc == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(wc));
      out += buf;
    } else if ((wc >= 0x80 && wc < 0xa0) || wc == 0x2028 || wc == 0x2029 || (wc >= 0x202a && wc <= 0x202e) ||
               (wc >= 0x2066 && wc <= 0x2069)) {
      // C1 controls (U+009B is a one-byte CSI), line separators and bidi overrides that reorder a row
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(wc));
      out += buf;
    } else {
      out += bytes;
    }
  });
  return out;
}

size_t display_width(const std::string& s) {
  size_t w = 0;
  each_char(s, [&](std::string_view, wint_t wc) {
    int cw = wc == WEOF ? 1 : ::wcwidth(wchar_t(wc));
    w += cw < 0 ? 1 : size_t(cw);  // combining marks are 0, East Asian wide characters 2
  });
  return w;
}

static std::string pad(const std::string& s, size_t width) {
  size_t w = display_width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

void Output::record(const json& obj) {
  if (json_) {
    json o = json::object();
    o["v"] = 1;
    for (auto it = obj.begin(); it != obj.end(); ++it) o[it.key()] = it.value();
    std::cout << dump_json(o) << "\n";
    return;
  }
  size_t kw = 0;
  for (auto it = obj.begin(); it != obj.end(); ++it) kw = std::max(kw, it.key().size());
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it.value().is_array() && !it.value().empty() && it.value()[0].is_object()) continue;  // shown by caller
    std::cout << pad(it.key(), kw) << "  " << cell_text(it.value()) << "\n";
  }
}

void Output::rows(const std::vector<Column>& cols, const std::vector<json>& rows, const std::string& kind) {
  if (json_) {
    for (const auto& r : rows) {
      json o = json::object();
      o["v"] = 1;
      if (!kind.empty()) o["type"] = kind;
      for (auto it = r.begin(); it != r.end(); ++it) o[it.key()] = it.value();
      std::cout << dump_json(o) << "\n";
    }
    return;
  }
  std::vector<size_t> w(cols.size());
  std::vector<std::vector<std::string>> cells;
  for (size_t c = 0; c < cols.size(); ++c) w[c] = display_width(cols[c].header);
  for (const auto& r : rows) {
    std::vector<std::string> line;
    for (size_t c = 0; c < cols.size(); ++c) {
      std::string t = r.contains(cols[c].key) ? cell_text(r[cols[c].key]) : "";
      w[c] = std::max(w[c], display_width(t));
      line.push_back(std::move(t));
    }
    cells.push_back(std::move(line));
  }
  auto emit = [&](const std::vector<std::string>& line) {
    std::string s;
    for (size_t c = 0; c < line.size(); ++c) s += (c ? "  " : "") + (c + 1 == line.size() ? line[c] : pad(line[c], w[c]));
    std::cout << s << "\n";
  };
  std::vector<std::string> head;
  for (auto& c : cols) head.push_back(c.header);
  emit(head);
  for (auto& l : cells) emit(l);
}

void Output::text(const std::string& s) {
  if (!json_) std::cout << s << (s.empty() || s.back() != '\n' ? "\n" : "");
}

}  // namespace rc::cli
