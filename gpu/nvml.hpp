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
#include <string_view>
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

/// What the GPU and the host did while something ran: the GPU figures over the NVML readings
/// in a window (all 0 when unreadable or none fell there), the host's over /proc between the
/// host readings around the window (on any device, with or without NVML).
struct clock_summary {
  int32_t sm_mhz = 0;   ///< median
  int32_t mem_mhz = 0;  ///< median
  int32_t readings = 0; ///< NVML readings summarised
  int32_t sm_min_mhz = 0;
  int32_t sm_max_mhz = 0;
  int32_t temperature_c = 0; ///< the highest
  double power_w = 0;        ///< median
  /// OR of the readings' throttle masks without `gpu_idle`, which an idle moment between calls
  /// sets and which says nothing about the clocks a call ran at.
  uint64_t throttle_reasons = 0;
  /// Cores busy on average (user, system, irq, steal: all but idle and iowait), the whole host's,
  /// the timed process included; -1 when /proc/stat could not be read twice with time between.
  double host_busy = -1;
  /// The host's 1-minute load average at the window's end; -1 when unreadable.
  double load_avg = -1;
};

/// Share of the highest SM clock by which the lowest may fall short before a window counts as
/// drifting: NVML's SM clock steps are ~15 MHz (under 1 % of an H200's 1980 MHz), and the
/// medians of one candidate's evaluations were seen to split 3-4 % apart with the clock moving.
inline constexpr double drift_sm_share = 0.03;

/// Throttle bits that mean the clocks were held down for heat or power, or by the hardware.
inline constexpr uint64_t drift_throttle_mask = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

/// A phrase saying why a window's timing is not trustworthy (its SM clock moved by more than
/// `drift_sm_share`, or a bit of `drift_throttle_mask` was set), for a verdict's notes; empty
/// when the window is fine or nothing was readable.
std::string drift_problem(const clock_summary& s);

/// The aggregate `cpu` line of /proc/stat: jiffies busy and in all, and the `cpuN` lines seen.
struct host_cpu_times {
  bool readable = false;
  uint64_t busy = 0;
  uint64_t total = 0;
  int cores = 0;
};
/// Parses /proc/stat's text; `readable` false when it has no aggregate `cpu` line.
host_cpu_times parse_proc_stat(std::string_view text);
/// The first field of /proc/loadavg; -1 when it is not a number.
double parse_loadavg(std::string_view text);
/// Cores busy on average between two /proc/stat readings; -1 when no time passed between them
/// or either is unreadable.
double cores_busy(const host_cpu_times& before, const host_cpu_times& after);

/// Where the host readings come from; tests point it at files of their own.
struct host_source {
  std::string proc_stat = "/proc/stat";
  std::string loadavg = "/proc/loadavg";
};

/// Polls a GPU's clocks, temperature, power and throttle reasons on its own thread from
/// construction until `stop()` (or destruction), so that each measurement can say in which
/// state it was taken, and reads the host's CPU time and load average at construction, at
/// every poll and at `stop()`. A CPU device, or no NVML, starts no thread (nothing wakes up
/// beside a CPU timing): its GPU figures are zeros and its host figures span construction to
/// stop().
class clock_sampler {
public:
  using clock = std::chrono::steady_clock;

  clock_sampler(nvml_library& lib, gpu_target target,
                std::chrono::milliseconds period = std::chrono::milliseconds(25),
                host_source host = {});
  /// NVML of the system, for a kiln device id.
  explicit clock_sampler(const std::string& device);
  ~clock_sampler();
  clock_sampler(const clock_sampler&) = delete;
  clock_sampler& operator=(const clock_sampler&) = delete;

  /// Ends the polling (idempotent).
  void stop();
  /// The GPU readings taken in [from, to] (all of them when none falls there), and the host
  /// between its last reading at or before `from` and its first at or after `to` (the nearest
  /// ones inside where there are none outside).
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
    int32_t temperature_c;
    double power_w;
    uint64_t throttle_reasons;
  };
  struct host_sample {
    clock::time_point at;
    host_cpu_times cpu;
    double load_avg;
  };
  void poll(nvml_library& lib, gpu_target target, std::chrono::milliseconds period);
  host_sample read_host() const;
  host_source host_;
  std::vector<host_sample> host_samples_;
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
