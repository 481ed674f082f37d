#pragma once
// Logs go to stderr (results own stdout) and, with --log-file, also to a file.
#include "core/config.hpp"

namespace rc::cli {

// Before the settings are known: a plain stderr logger, so problems while loading them are reported.
void setup_early_logging();
// The configured level, --quiet and --log-file. Throws Error(config) for a log file that cannot be opened.
void setup_logging(const Settings& s);

}  // namespace rc::cli
