#pragma once

#include <string>
#include <vector>

namespace kiln {

/// A device an evaluator can own.
struct device_info {
  std::string id; ///< `cpu` or `cuda:N`
  std::string name;
  long long memory_bytes = 0;
  int multiprocessors = 0;
  std::string capability;
};

/// The devices of this host: every CUDA device the runtime sees (when kiln was built with the
/// CUDA toolkit and a driver is present), otherwise just the CPU. Never throws.
std::vector<device_info> discover_devices();

/// Resolves the `[evaluator] devices` setting (`auto`, `cpu`, or explicit ids) against the
/// discovered devices; throws std::runtime_error for an id that does not exist here.
std::vector<device_info> select_devices(const std::vector<std::string>& wanted);

} // namespace kiln
