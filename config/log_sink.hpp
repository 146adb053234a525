#pragma once

// The loggers kiln writes its logs through: every line passes `kiln::secrets::redact` before
// any sink sees it, so that an echoed key in a provider's error body, a warning that quotes a
// candidate's output or a debug dump of a request never reaches stderr or kiln.log.

#include <memory>
#include <string>
#include <vector>

#include <spdlog/logger.h>

namespace kiln {

/// A logger named `name` that writes to `sinks` (each with its own level), redacted.
std::shared_ptr<spdlog::logger> redacting_logger(const std::string& name,
                                                 std::vector<spdlog::sink_ptr> sinks);

} // namespace kiln
