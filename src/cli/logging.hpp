#pragma once
// Logs go to stderr (results own stdout) and, with --log-file, also to a file.
#include "core/config.hpp"

namespace rc::cli {

// Before the settings are known: a plain stderr logger, so problems while loading them are reported;
// no colour when no_color (the NO_COLOR variable) is set and not empty.
void setup_early_logging(const char* no_color);
// The configured level, --quiet, --log-file, --log-format and --color. Throws Error(config) for a log
// file that cannot be opened.
void setup_logging(const Settings& s);
// The error that ends a command: "rewardctl: MESSAGE" on stderr (a JSON line with --log-format json)
// and an error line in the log file, whatever --log-level says.
void log_failure(const std::string& message);

}  // namespace rc::cli
