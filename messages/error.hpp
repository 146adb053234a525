#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>

namespace kiln {

/// kiln's error codes. Messages start lowercase and carry their context.
enum class ec : uint8_t {
  /// Not an error.
  none = 0,
  /// The per-task or per-run budget refuses another query or evaluation.
  budget_exhausted,
  /// A configuration file or value is invalid.
  bad_config,
  /// A worker role (an agent, a gateway, an evaluator) is not available right now.
  unavailable,
  /// An LLM provider failed in a way that retrying will not fix.
  provider_failed,
  /// The run was stopped by a signal or a request.
  stopped,
  /// An evaluation could not be carried out (harness broken, interpreter missing).
  eval_failed,
  /// A file could not be read or written.
  io_error,
  /// A device failed its health check; its evaluator takes no more work.
  device_unhealthy,
};

const char* to_string(ec code);

/// The CAF error category of kiln's codes.
constexpr caf::atom_value error_category = caf::atom("kiln");

template <class... Ts> caf::error make_error(ec code, Ts&&... context) {
  return caf::error{static_cast<uint8_t>(code), error_category,
                    caf::make_message(std::forward<Ts>(context)...)};
}

/// One line for humans: `budget_exhausted: 1_MLP used 40 of 40`.
std::string render(const caf::error& err);

/// True when `err` is kiln's `code`.
bool is(const caf::error& err, ec code);

} // namespace kiln
