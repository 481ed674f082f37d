#include "cli/output.hpp"

#include <iostream>

namespace rc::cli {

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string cell_text(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  return dump_json(v);
}

size_t display_width(const std::string& s) {
  size_t w = 0;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    uint32_t cp = c;
    int len = 1;
    if (c >= 0xF0) { cp = c & 0x07; len = 4; }
    else if (c >= 0xE0) { cp = c & 0x0F; len = 3; }
    else if (c >= 0xC0) { cp = c & 0x1F; len = 2; }
    for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    i += len;
    bool wide = (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
                (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
                (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1FAFF) || (cp >= 0x20000 && cp <= 0x3FFFD);
    w += wide ? 2 : 1;
  }
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
