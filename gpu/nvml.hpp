#pragma once

// GPU clocks, temperature and power through NVML, loaded with dlopen so that kiln neither links
// nor needs the driver's library: where it is absent (a CPU-only host, a container without the
// driver's user-space files) every reading says "unreadable" and why, and nothing fails.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/devices.hpp"
#include "messages/eval.hpp"

namespace kiln {

/// One reading of a GPU's state; `readable` false (with `problem`) when NVML cannot answer.
/// Fields NVML does not report for this device stay 0.
struct gpu_reading {
  bool readable = false;
  std::string problem; ///< why not readable, e.g. "no NVML: cannot load libnvidia-ml.so.1"
  int32_t sm_mhz = 0;
  int32_t mem_mhz = 0;
  int32_t sm_max_mhz = 0;
  int32_t mem_max_mhz = 0;
  int32_t temperature_c = 0;
  double power_w = 0;
  uint64_t throttle_reasons = 0; ///< NVML's clocks-event bit mask
};

/// Names of the throttle bits set in `mask` (`gpu_idle`, `sw_power_cap`, `hw_slowdown`, ...).
std::vector<std::string> throttle_names(uint64_t mask);

/// Which GPU to read: NVML numbers devices in PCI order, the CUDA runtime (and hence
/// CUDA_VISIBLE_DEVICES) fastest first, so the PCI bus id is the reliable link; the index is
/// the fallback when no bus id is known.
struct gpu_target {
  std::string pci_bus_id; ///< e.g. `0000:3B:00.0`; empty: use `index`
  int index = -1;         ///< -1: not a GPU (nothing to read)
};

/// The target of a kiln device id (`cuda:N` → the bus id the CUDA runtime gives for N, when kiln
/// was built with CUDA; `cpu` → none).
gpu_target gpu_target_for(const std::string& device);

/// The NVML library of this process. `nvml_library::system()` is the driver's
/// `libnvidia-ml.so.1`; tests make one from another file name. Loaded and initialised on first
/// use; thread-safe.
class nvml_library {
public:
  explicit nvml_library(std::string file);
  ~nvml_library();
  nvml_library(const nvml_library&) = delete;
  nvml_library& operator=(const nvml_library&) = delete;

  static nvml_library& system();

  /// Whether NVML loaded and initialised; `problem()` says why not.
  bool available();
  std::string problem();

  /// Everything readable about `target` now.
  gpu_reading read(const gpu_target& target);

  /// Every GPU NVML sees, in its order (nvidia-smi's index), with its UUID; empty without NVML.
  std::vector<physical_gpu> gpus();
  /// NVML's index of the GPU at `pci_bus_id`; -1 when unknown.
  int index_of(const std::string& pci_bus_id);
  /// Whether the GPU at `pci_bus_id` is in MIG mode (false when NVML cannot tell).
  bool mig_enabled(const std::string& pci_bus_id);

  struct api;

private:
  bool load(); // with mu_ held
  std::string file_;
  std::mutex mu_;
  bool tried_ = false;
  void* handle_ = nullptr;
  std::unique_ptr<api> api_;
  std::string problem_;
};

/// The SM and memory clocks seen while something ran, medians of the readings in a window.
struct clock_summary {
  int32_t sm_mhz = 0; ///< 0: unreadable or no reading in the window
  int32_t mem_mhz = 0;
  int32_t readings = 0;
};

/// Polls a GPU's clocks on its own thread from construction until `stop()` (or destruction),
/// so that each measurement can say at which clocks it was taken. A CPU device, or no NVML,
/// starts no thread and summarises to zeros.
class clock_sampler {
public:
  using clock = std::chrono::steady_clock;

  clock_sampler(nvml_library& lib, gpu_target target,
                std::chrono::milliseconds period = std::chrono::milliseconds(25));
  /// NVML of the system, for a kiln device id.
  explicit clock_sampler(const std::string& device);
  ~clock_sampler();
  clock_sampler(const clock_sampler&) = delete;
  clock_sampler& operator=(const clock_sampler&) = delete;

  /// Ends the polling (idempotent).
  void stop();
  /// Medians over the readings taken in [from, to]; over all readings when none falls there.
  clock_summary summary(clock::time_point from, clock::time_point to);
  /// Medians over all readings.
  clock_summary summary();
  /// Medians over the last `span_ms` before stop() (plus a little slack for the runner's exit):
  /// the timing loop, which ends just before a runner writes its result, rather than its
  /// import and start-up, when clocks may still be ramping.
  clock_summary last(double span_ms);

private:
  struct sample {
    clock::time_point at;
    int32_t sm_mhz;
    int32_t mem_mhz;
  };
  void poll(nvml_library& lib, gpu_target target, std::chrono::milliseconds period);
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  clock::time_point stopped_at_{};
  std::vector<sample> samples_;
  std::thread thread_;
};

/// `s` with the SM and memory clocks of the sampler's last `span_ms` (0 where unreadable).
timing_stats with_clocks(timing_stats s, clock_sampler& clocks, double span_ms);

} // namespace kiln
