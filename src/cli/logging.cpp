#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/logging.hpp"

#include "core/error.hpp"

namespace rc::cli {

void setup_logging(const Settings& s) {
  std::vector<spdlog::sink_ptr> sinks;
  auto err = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  err->set_pattern("%^%l%$: %v");
  // --quiet keeps warnings and errors only; the file still gets everything at the chosen level.
  err->set_level(s.quiet ? spdlog::level::warn : spdlog::level::from_str(s.log_level));
  sinks.push_back(err);
  if (!s.log_file.empty()) {
    try {
      auto f = std::make_shared<spdlog::sinks::basic_file_sink_mt>(s.log_file);
      f->set_formatter(std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%eZ %l [%P] %v",
                                                                  spdlog::pattern_time_type::utc));
      f->set_level(spdlog::level::from_str(s.log_level));
      sinks.push_back(f);
    } catch (const spdlog::spdlog_ex& e) {
      throw Error(Exit::config, "cannot open log file " + s.log_file + ": " + e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>("rewardctl", sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::from_str(s.log_level));
  spdlog::set_default_logger(logger);
}

void setup_early_logging() {
  auto err = spdlog::stderr_color_mt("early");
  err->set_pattern("%^%l%$: %v");
  spdlog::set_default_logger(err);
}

}  // namespace rc::cli
