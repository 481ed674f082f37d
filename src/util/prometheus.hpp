#pragma once
// The Prometheus text format's one escaping rule, shared by the job metrics (textfile) and serve's
// /metrics: a label value escapes backslash, double quote and newline.
#include <string>

namespace rc {

inline std::string prometheus_label(const std::string& v) {
  std::string o;
  o.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

}  // namespace rc
