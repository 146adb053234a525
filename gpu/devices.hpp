#pragma once

// The devices of this host and how kiln names them. kiln's `cuda:N` is the N-th GPU that kiln's
// own CUDA_VISIBLE_DEVICES lets it see (as in any CUDA program); a runner is given that one
// GPU by its UUID in its own CUDA_VISIBLE_DEVICES, so that it sees exactly that device as its
// `cuda:0`, whatever mask kiln was started with (docs/evaluation.md, "Devices").

#include <optional>
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
  /// A GPU's index as the host numbers it (NVML's, which nvidia-smi shows): the same for every
  /// process whatever its mask. -1 for the CPU, or where NVML cannot tell.
  int physical_index = -1;
  /// `GPU-<uuid>` (a MIG instance: `MIG-<uuid>`, or the mask's own `MIG-...` entry); empty for
  /// the CPU and where the runtime reports none.
  std::string uuid;
  /// What a runner's CUDA_VISIBLE_DEVICES holds for this device: the UUID, else kiln's own
  /// mask entry for it; empty for the CPU (no GPU visible).
  std::string runner_visible;
  /// A stand-in GPU of the test hook KILN_TEST_FAKE_GPUS: its runners get its fake UUID as
  /// CUDA_VISIBLE_DEVICES (so they see no GPU) and run on the CPU. Never set otherwise.
  bool test_fake = false;
};

/// The PCI bus id the CUDA runtime gives for device `index`; empty without CUDA or on error.
std::string cuda_pci_bus_id(int index);

/// The devices of this host: every CUDA device the runtime sees (when kiln was built with the
/// CUDA toolkit and a driver is present), otherwise just the CPU, which is always last. The
/// GPUs are found once per process. Never throws.
std::vector<device_info> discover_devices();

/// Resolves the `[evaluator] devices` setting (`auto`, `cpu`, or explicit ids) against the
/// discovered devices; throws std::runtime_error for an id that does not exist here.
std::vector<device_info> select_devices(const std::vector<std::string>& wanted);

/// The discovered device with this id (`cpu`, `cuda:N`); nullopt when there is none.
std::optional<device_info> find_device(const std::string& id);

// -- CUDA_VISIBLE_DEVICES ----------------------------------------------------------------------

/// One GPU as the host lists it (NVML, in nvidia-smi's order).
struct physical_gpu {
  int index = 0;
  std::string uuid; ///< `GPU-<uuid>`
};

/// One device a mask makes visible, in the order CUDA numbers them (`cuda:0` first).
struct visible_gpu {
  /// Position in the physical list; -1 for a `MIG-...` entry, which is kept as it is.
  int physical = -1;
  /// The mask's own entry for it (`2`, `GPU-8932f937`, `MIG-...`); empty when the mask is unset.
  std::string entry;
};

/// The GPUs `mask` (CUDA_VISIBLE_DEVICES; null when unset) makes visible among `gpus`, read as
/// the CUDA driver reads it:
/// - unset: every GPU, in order; an empty value: none;
/// - a value that starts with `GPU-`: UUIDs, or prefixes of them that match exactly one GPU;
///   an entry that is not `GPU-...`, or that matches no GPU or several, ends the list;
/// - a value that starts with `MIG-`: MIG instances, kept as opaque ids; an entry that is not
///   `MIG-...` ends the list;
/// - otherwise indices: each entry read as strtoul reads it after leading blanks (`1gpu` is 1,
///   `+3` is 3, `-0` is 0); a negative value, a non-number or an index past the last GPU ends
///   the list;
/// - a device named twice makes the whole list empty.
std::vector<visible_gpu> visible_gpus(const char* mask, const std::vector<physical_gpu>& gpus);

/// The mask's entries as written, before they are matched with devices (same rules, minus
/// those that need the device list): what CUDA's N-th visible device was called in the mask.
std::vector<std::string> mask_entries(const char* mask);

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` for 16 UUID bytes (`prefix` instead of `GPU-`);
/// empty when every byte is zero (the runtime knows none).
std::string format_uuid(const unsigned char (&bytes)[16], const char* prefix = "GPU-");

/// The environment variable of the test hook: a comma-separated list of fake GPU UUIDs
/// (`GPU-...`) that replaces the host's GPUs, for tests of device mapping and locking on hosts
/// without one. kiln's own CUDA_VISIBLE_DEVICES applies to them as to real GPUs.
inline constexpr const char* test_fake_gpus_env = "KILN_TEST_FAKE_GPUS";

} // namespace kiln
