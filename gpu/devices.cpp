#include "gpu/devices.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "gpu/nvml.hpp"

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

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t from = 0;
  for (;;) {
    size_t comma = s.find(',', from);
    out.push_back(s.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos)
      return out;
    from = comma + 1;
  }
}

/// An index entry as the driver reads it (strtoul after leading blanks); -1 for none or a
/// negative one. Huge values saturate: they are past the last GPU either way.
long long index_of_entry(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
    ++i;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-'))
    negative = s[i++] == '-';
  long long v = 0;
  size_t digits = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i, ++digits)
    v = std::min<long long>(v * 10 + (s[i] - '0'), 1LL << 40);
  if (digits == 0 || (negative && v != 0))
    return -1;
  return v;
}

/// The host's GPUs when the test hook names fake ones: UUIDs, numbered in their order, masked
/// by kiln's own CUDA_VISIBLE_DEVICES as real ones are.
std::vector<device_info> fake_gpus(const std::string& list) {
  std::vector<physical_gpu> host;
  for (auto& raw : split_commas(list)) {
    auto uuid = trim(raw);
    bool ok = starts_with(uuid, "GPU-") && uuid.size() > 4
              && uuid.find_first_not_of("0123456789abcdefABCDEF-", 4) == std::string::npos;
    if (!ok) {
      spdlog::warn("devices: {} entry '{}' is not a GPU-<hex> UUID; left out", test_fake_gpus_env,
                   uuid);
      continue;
    }
    host.push_back({static_cast<int>(host.size()), uuid});
  }
  std::vector<device_info> out;
  for (const auto& v : visible_gpus(std::getenv("CUDA_VISIBLE_DEVICES"), host)) {
    device_info d;
    d.id = "cuda:" + std::to_string(out.size());
    d.test_fake = true;
    if (v.physical >= 0) {
      d.physical_index = host[static_cast<size_t>(v.physical)].index;
      d.uuid = host[static_cast<size_t>(v.physical)].uuid;
    } else {
      d.uuid = v.entry; // a MIG-... entry, opaque
    }
    d.runner_visible = d.uuid;
    d.name = "kiln test GPU (fake: runs on the CPU)";
    d.multiprocessors = 1;
    out.push_back(std::move(d));
  }
  return out;
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
  // The runtime has applied kiln's own mask already: device i is the mask's i-th entry. What
  // the host calls it comes from NVML, matched by UUID (or PCI bus id).
  const auto entries = mask_entries(std::getenv("CUDA_VISIBLE_DEVICES"));
  auto& nvml = nvml_library::system();
  const auto host = nvml.gpus();
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
    unsigned char bytes[16];
    static_assert(sizeof prop.uuid.bytes == sizeof bytes);
    std::copy(std::begin(prop.uuid.bytes), std::end(prop.uuid.bytes), bytes);
    d.uuid = format_uuid(bytes);
    const std::string entry = static_cast<size_t>(i) < entries.size() ? entries[i] : "";
    bool mig = starts_with(entry, "MIG-");
    for (const auto& g : host)
      if (!d.uuid.empty() && g.uuid == d.uuid)
        d.physical_index = g.index;
    if (d.physical_index < 0) {
      d.physical_index = nvml.index_of(d.pci_bus_id);
      // On that GPU but not that GPU, which is in MIG mode: one of its MIG instances.
      if (d.physical_index >= 0 && !d.uuid.empty() && nvml.mig_enabled(d.pci_bus_id))
        mig = true;
    }
    if (mig && starts_with(d.uuid, "GPU-"))
      d.uuid = "MIG-" + d.uuid.substr(4);
    // The UUID names one device for every process, whatever its mask or CUDA_DEVICE_ORDER; a
    // MIG entry is passed on as kiln was given it.
    if (starts_with(entry, "MIG-"))
      d.runner_visible = entry;
    else if (!d.uuid.empty())
      d.runner_visible = d.uuid;
    else
      d.runner_visible = entry.empty() ? std::to_string(i) : entry;
    out.push_back(std::move(d));
  }
#endif
  return out;
}

/// The GPUs, found once per process (the CUDA runtime reads the mask once too); with the test
/// hook, again whenever the hook's list or the mask changed.
std::vector<device_info> gpu_devices() {
  static std::mutex mutex;
  static bool have = false;
  static std::string have_key;
  static std::vector<device_info> have_gpus;
  const char* fake = std::getenv(test_fake_gpus_env);
  std::string key = "cuda";
  if (fake != nullptr) {
    const char* mask = std::getenv("CUDA_VISIBLE_DEVICES");
    key = std::string{"fake "} + fake + (mask ? std::string{" mask="} + mask : " unset");
  }
  std::lock_guard<std::mutex> lock{mutex};
  if (have && have_key == key)
    return have_gpus;
  std::vector<device_info> gpus;
  try {
    gpus = fake != nullptr ? fake_gpus(fake) : cuda_devices();
  } catch (...) {
    gpus.clear(); // "never throws": a broken runtime means no CUDA devices
  }
  if (fake != nullptr)
    spdlog::warn("devices: test hook {} is set: {} fake GPU(s) whose runners run on the CPU; "
                 "nothing measured on them is a GPU figure",
                 test_fake_gpus_env, gpus.size());
  have = true;
  have_key = key;
  have_gpus = gpus;
  return gpus;
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
  std::vector<device_info> out = gpu_devices();
  out.push_back(cpu_device());
  return out;
}

std::optional<device_info> find_device(const std::string& id) {
  if (id == "cpu")
    return cpu_device();
  for (auto& d : gpu_devices())
    if (d.id == id)
      return d;
  return std::nullopt;
}

std::vector<std::string> mask_entries(const char* mask) {
  std::vector<std::string> out;
  if (mask == nullptr)
    return out;
  const std::string value{mask};
  for (const char* prefix : {"GPU-", "MIG-"}) {
    if (!starts_with(value, prefix))
      continue;
    for (auto& e : split_commas(value)) {
      if (!starts_with(e, prefix))
        break;
      if (std::find(out.begin(), out.end(), e) != out.end())
        return {}; // a device named twice: none at all
      out.push_back(e);
    }
    return out;
  }
  for (auto& e : split_commas(value)) {
    long long index = index_of_entry(e);
    if (index < 0)
      break;
    auto text = std::to_string(index);
    if (std::find(out.begin(), out.end(), text) != out.end())
      return {};
    out.push_back(text);
  }
  return out;
}

std::vector<visible_gpu> visible_gpus(const char* mask, const std::vector<physical_gpu>& gpus) {
  std::vector<visible_gpu> out;
  if (mask == nullptr) {
    for (size_t i = 0; i < gpus.size(); ++i)
      out.push_back({static_cast<int>(i), {}});
    return out;
  }
  const auto entries = mask_entries(mask);
  for (const auto& e : entries) {
    int at = -1;
    if (starts_with(e, "MIG-")) {
      out.push_back({-1, e});
      continue;
    }
    if (starts_with(e, "GPU-")) {
      int matches = 0;
      for (size_t i = 0; i < gpus.size(); ++i)
        if (starts_with(gpus[i].uuid, e.c_str())) {
          at = static_cast<int>(i);
          ++matches;
        }
      if (matches != 1)
        break; // unknown or ambiguous: the list ends here
    } else {
      long long index = std::stoll(e);
      if (index >= static_cast<long long>(gpus.size()))
        break;
      at = static_cast<int>(index);
    }
    for (const auto& v : out)
      if (v.physical == at)
        return {}; // two entries for one GPU: none at all
    out.push_back({at, e});
  }
  return out;
}

std::string format_uuid(const unsigned char (&bytes)[16], const char* prefix) {
  if (std::all_of(std::begin(bytes), std::end(bytes), [](unsigned char b) { return b == 0; }))
    return {};
  std::string out = prefix;
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      out += '-';
    std::snprintf(hex, sizeof hex, "%02x", bytes[i]);
    out += hex;
  }
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
