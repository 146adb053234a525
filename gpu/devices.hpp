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
  /// PCI bus id of a CUDA device (`0000:3B:00.0`): how NVML finds the same device.
  std::string pci_bus_id;
  /// The CPU's current and maximum clock (cpufreq, else /proc/cpuinfo); 0 where unreadable.
  /// GPU clocks come from NVML (gpu/nvml.hpp).
  int clock_mhz = 0;
  int max_clock_mhz = 0;
};

/// The PCI bus id the CUDA runtime gives for device `index`; empty without CUDA or on error.
std::string cuda_pci_bus_id(int index);

/// The devices of this host: every CUDA device the runtime sees (when kiln was built with the
/// CUDA toolkit and a driver is present), otherwise just the CPU. Never throws.
std::vector<device_info> discover_devices();

/// Resolves the `[evaluator] devices` setting (`auto`, `cpu`, or explicit ids) against the
/// discovered devices; throws std::runtime_error for an id that does not exist here.
std::vector<device_info> select_devices(const std::vector<std::string>& wanted);

} // namespace kiln
