// Logs go to stderr (results own stdout) and, with --log-file, also to a file. The error that ends a
// command reaches the file too (cron jobs are read from their log, not from a terminal). With
// --log-format json every log line is one JSON object, for log shippers.
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>
#include <optional>
#include <string_view>

#include "cli/logging.hpp"
#include "cli/output.hpp"
#include "core/clock.hpp"
#include "base/error.hpp"

namespace rc::cli {
namespace {

// A message that is a JSON object whose first key is "event" ({"event":"request","path":...}, as
// serve logs each request) is a structured line: its fields become the JSON line's own fields, or
// `event key=value ...` in text.
std::optional<nlohmann::ordered_json> structured(const spdlog::details::log_msg& m) {
  static const std::string kMark = "{\"event\":";
  std::string_view p(m.payload.data(), m.payload.size());
  if (p.compare(0, kMark.size(), kMark) != 0) return std::nullopt;
  auto j = nlohmann::ordered_json::parse(p.begin(), p.end(), nullptr, false);
  if (!j.is_object()) return std::nullopt;
  return j;
}

// {"ts":"2025-11-30T15:59:59.123Z","level":"error","pid":42,"msg":"..."}
class JsonFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& m, spdlog::memory_buf_t& dest) override {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(m.time.time_since_epoch()).count();
    nlohmann::ordered_json j{{"ts", format_utc(ms)},
           {"level", std::string(spdlog::level::to_string_view(m.level).data(),
                                 spdlog::level::to_string_view(m.level).size())},
           {"pid", int64_t(::getpid())}};
    if (auto ev = structured(m)) {
      for (auto it = ev->begin(); it != ev->end(); ++it) j[it.key()] = it.value();
    } else {
      j["msg"] = std::string(m.payload.data(), m.payload.size());
    }
    auto s = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    dest.append(s.data(), s.data() + s.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

// A text log line whose message is made printable(): a name or reason holding an ANSI escape or a
// newline can neither repaint the operator's terminal nor forge a line in the log file.
class EscapingFormatter : public spdlog::formatter {
 public:
  explicit EscapingFormatter(std::string pattern)
      : pattern_(std::move(pattern)), inner_(pattern_, spdlog::pattern_time_type::utc) {}
  void format(const spdlog::details::log_msg& m, spdlog::memory_buf_t& dest) override {
    std::string text(m.payload.data(), m.payload.size());
    if (auto ev = structured(m)) {
      text = ev->value("event", "event");
      for (auto it = ev->begin(); it != ev->end(); ++it)
        if (it.key() != "event") {
          // a string with a space, quote or '=' is quoted (as JSON), so that a line splits one way
          bool plain = it->is_string() && it->get<std::string>().find_first_of(" \"=") == std::string::npos &&
                       !it->get<std::string>().empty();
          text += " " + it.key() + "=" + (plain ? it->get<std::string>() : it->dump());
        }
    }
    std::string safe = printable(text);
    spdlog::details::log_msg copy = m;
    copy.payload = spdlog::string_view_t(safe.data(), safe.size());
    inner_.format(copy, dest);
    // the colour sink reads where %^...%$ fell from the message it passed in
    m.color_range_start = copy.color_range_start;
    m.color_range_end = copy.color_range_end;
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<EscapingFormatter>(pattern_); }

 private:
  std::string pattern_;
  spdlog::pattern_formatter inner_;
};

std::shared_ptr<spdlog::sinks::sink> g_file;  // the --log-file sink, when there is one
bool g_json = false;

spdlog::color_mode color_mode(const std::string& when) {
  if (when == "always") return spdlog::color_mode::always;
  if (when == "never") return spdlog::color_mode::never;
  return spdlog::color_mode::automatic;
}

void set_format(spdlog::sinks::sink& s, bool json_lines, const char* text_pattern) {
  if (json_lines) s.set_formatter(std::make_unique<JsonFormatter>());
  else
    s.set_formatter(std::make_unique<EscapingFormatter>(text_pattern));
}

}  // namespace

void setup_logging(const Settings& s) {
  std::vector<spdlog::sink_ptr> sinks;
  g_json = s.log_format == "json";
  auto err = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(color_mode(s.color));
  set_format(*err, g_json, "%^%l%$: %v");
  // --quiet keeps warnings and errors only; the file still gets everything at the chosen level.
  err->set_level(s.quiet ? spdlog::level::warn : spdlog::level::from_str(s.log_level));
  sinks.push_back(err);
  if (!s.log_file.empty()) {
    try {
      auto f = std::make_shared<spdlog::sinks::basic_file_sink_mt>(s.log_file);
      set_format(*f, g_json, "%Y-%m-%dT%H:%M:%S.%eZ %l [%P] %v");
      f->set_level(spdlog::level::from_str(s.log_level));
      sinks.push_back(f);
      g_file = f;
    } catch (const spdlog::spdlog_ex& e) {
      throw Error(Errc::config, "cannot open log file " + s.log_file + ": " + e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>("rewardctl", sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::from_str(s.log_level));
  spdlog::set_default_logger(logger);
}

void setup_early_logging(const char* no_color) {
  auto err = spdlog::stderr_color_mt("early", no_color && *no_color ? spdlog::color_mode::never
                                                                    : spdlog::color_mode::automatic);
  err->set_formatter(std::make_unique<EscapingFormatter>("%^%l%$: %v"));
  spdlog::set_default_logger(err);
}

// The error that ends the command: "rewardctl: MESSAGE" on stderr (a JSON line with --log-format
// json), and an error line in the log file whatever --log-level says.
void log_failure(const std::string& message) {
  spdlog::default_logger()->flush();
  if (g_json) {
    spdlog::sink_ptr stderr_sink = spdlog::default_logger()->sinks().front();
    spdlog::details::log_msg m("rewardctl", spdlog::level::err, message);
    stderr_sink->log(m);
    stderr_sink->flush();
  } else {
    std::cerr << "rewardctl: " << printable(message) << "\n";
  }
  if (g_file) {
    spdlog::details::log_msg m("rewardctl", spdlog::level::err, message);
    g_file->log(m);
    g_file->flush();
  }
}

}  // namespace rc::cli
