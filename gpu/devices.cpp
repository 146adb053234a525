#include "gpu/devices.hpp"

#include <fstream>
#include <stdexcept>
#include <thread>

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace kiln {

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
}

/// The value of the first `key: value` line of a /proc file, or empty.
std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon != std::string::npos && trim(line.substr(0, colon)) == key)
      return trim(line.substr(colon + 1));
  }
  return {};
}

/// A cpufreq file (kHz) in MHz; 0 when absent or garbled.
int read_mhz(const char* file, int per_mhz) {
  std::ifstream in(file);
  long long v = 0;
  if (!(in >> v) || v <= 0)
    return 0;
  return static_cast<int>(v / per_mhz);
}

device_info cpu_device() {
  device_info cpu;
  cpu.id = "cpu";
  unsigned cores = std::thread::hardware_concurrency();
  std::string model = proc_field("/proc/cpuinfo", "model name");
  if (model.empty())
    model = "CPU";
  cpu.name = model + " (" + std::to_string(cores) + (cores == 1 ? " core)" : " cores)");
  // The evaluator's analogue of streaming multiprocessors: how many can work at once.
  cpu.multiprocessors = static_cast<int>(cores);
  std::string mem = proc_field("/proc/meminfo", "MemTotal"); // "24584232 kB"
  if (!mem.empty()) {
    try {
      cpu.memory_bytes = std::stoll(mem) * 1024;
    } catch (const std::exception&) {
      cpu.memory_bytes = 0;
    }
  }
  cpu.clock_mhz = read_mhz("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", 1000);
  cpu.max_clock_mhz = read_mhz("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", 1000);
  if (cpu.clock_mhz == 0) {
    // Virtual machines often lack cpufreq; /proc/cpuinfo still says what the kernel measured.
    try {
      cpu.clock_mhz = static_cast<int>(std::stod(proc_field("/proc/cpuinfo", "cpu MHz")));
    } catch (const std::exception&) {
      cpu.clock_mhz = 0;
    }
  }
  return cpu;
}

std::vector<device_info> cuda_devices() {
  std::vector<device_info> out;
#ifdef KILN_HAVE_CUDA
  // Without a driver the runtime answers cudaErrorInsufficientDriver (35) or
  // cudaErrorNoDevice and leaves the count unwritten: start from 0 and trust only success.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // do not leave the error behind for the next runtime call
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    device_info d;
    d.id = "cuda:" + std::to_string(i);
    d.name = prop.name;
    d.memory_bytes = static_cast<long long>(prop.totalGlobalMem);
    d.multiprocessors = prop.multiProcessorCount;
    d.capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    d.pci_bus_id = cuda_pci_bus_id(i);
    out.push_back(std::move(d));
  }
#endif
  return out;
}

} // namespace

std::string cuda_pci_bus_id([[maybe_unused]] int index) {
#ifdef KILN_HAVE_CUDA
  char id[64] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof id, index) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  return id;
#else
  return {};
#endif
}

std::vector<device_info> discover_devices() {
  std::vector<device_info> out;
  try {
    out = cuda_devices();
  } catch (...) {
    out.clear(); // "never throws": a broken runtime means no CUDA devices
  }
  out.push_back(cpu_device());
  return out;
}

std::vector<device_info> select_devices(const std::vector<std::string>& wanted) {
  std::vector<device_info> all = discover_devices();
  if (wanted.empty())
    throw std::runtime_error("no devices given; use \"auto\", \"cpu\" or ids such as \"cuda:0\"");
  if (wanted.size() == 1 && wanted.front() == "auto") {
    std::vector<device_info> gpus;
    for (auto& d : all)
      if (d.id != "cpu")
        gpus.push_back(d);
    if (!gpus.empty())
      return gpus;
    return {all.back()}; // the CPU is always last
  }
  std::string have;
  for (auto& d : all)
    have += (have.empty() ? "" : ", ") + d.id;
  std::vector<device_info> out;
  for (const auto& id : wanted) {
    if (id == "auto")
      throw std::runtime_error("device \"auto\" cannot be combined with explicit devices");
    for (auto& d : out)
      if (d.id == id)
        throw std::runtime_error("device " + id + " is listed twice (one evaluator per device)");
    bool found = false;
    for (auto& d : all) {
      if (d.id == id) {
        out.push_back(d);
        found = true;
        break;
      }
    }
    if (!found)
      throw std::runtime_error("device " + id + " not found; this host has: " + have);
  }
  return out;
}

} // namespace kiln
