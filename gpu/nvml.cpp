#include "gpu/nvml.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include <dlfcn.h>

#include "gpu/devices.hpp"

namespace kiln {

namespace {

// The few declarations of nvml.h that kiln uses, restated so that no NVIDIA header is needed
// to build: an opaque device handle, int return codes (0 is NVML_SUCCESS), and the enum values
// of the clock and sensor kinds.
using nvml_return = int;
struct nvml_device_st;
using nvml_device = nvml_device_st*;
constexpr nvml_return nvml_success = 0;
constexpr int nvml_clock_sm = 1;
constexpr int nvml_clock_mem = 2;
constexpr int nvml_temperature_gpu = 0;

template <class F> bool bind(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(lib, name));
  return out != nullptr;
}

template <class T> T median_of(std::vector<T> xs) {
  if (xs.empty())
    return T{};
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

// A /proc file in one read: small, and rewritten by the kernel as a whole.
std::string read_small_file(const std::string& path) {
  std::ifstream in{path};
  if (!in)
    return {};
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

} // namespace

struct nvml_library::api {
  nvml_return (*init)() = nullptr;
  const char* (*error_string)(nvml_return) = nullptr;
  nvml_return (*by_pci)(const char*, nvml_device*) = nullptr;
  nvml_return (*by_index)(unsigned, nvml_device*) = nullptr;
  nvml_return (*clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*max_clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*temperature)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*power)(nvml_device, unsigned*) = nullptr;
  nvml_return (*throttle)(nvml_device, unsigned long long*) = nullptr;
  // Device listing (gpu/devices.cpp); optional, as the readings do not need them.
  nvml_return (*count)(unsigned*) = nullptr;
  nvml_return (*uuid)(nvml_device, char*, unsigned) = nullptr;
  nvml_return (*index)(nvml_device, unsigned*) = nullptr;
  nvml_return (*mig_mode)(nvml_device, unsigned*, unsigned*) = nullptr;

  std::string error(nvml_return rc) const {
    const char* s = error_string ? error_string(rc) : nullptr;
    return s ? std::string{s} : "NVML error " + std::to_string(rc);
  }
};

std::vector<std::string> throttle_names(uint64_t mask) {
  static const std::pair<uint64_t, const char*> bits[] = {
      {0x1, "gpu_idle"},
      {0x2, "applications_clocks_setting"},
      {0x4, "sw_power_cap"},
      {0x8, "hw_slowdown"},
      {0x10, "sync_boost"},
      {0x20, "sw_thermal_slowdown"},
      {0x40, "hw_thermal_slowdown"},
      {0x80, "hw_power_brake_slowdown"},
      {0x100, "display_clock_setting"},
  };
  std::vector<std::string> out;
  uint64_t known = 0;
  for (const auto& [bit, name] : bits) {
    known |= bit;
    if (mask & bit)
      out.emplace_back(name);
  }
  if (mask & ~known)
    out.emplace_back("other");
  return out;
}

gpu_target gpu_target_for(const std::string& device) {
  gpu_target t;
  if (device.rfind("cuda:", 0) != 0)
    return t;
  int n = -1;
  try {
    n = std::stoi(device.substr(5));
  } catch (const std::exception&) {
    return t;
  }
  // The device table knows the bus id and nvidia-smi's index whatever kiln's own mask is; a
  // fake GPU of the test hook is nothing NVML could read.
  if (auto d = find_device(device)) {
    if (d->test_fake)
      return t;
    t.index = d->physical_index >= 0 ? d->physical_index : n;
    t.pci_bus_id = d->pci_bus_id;
    return t;
  }
  t.index = n;
  t.pci_bus_id = cuda_pci_bus_id(n);
  return t;
}

nvml_library::nvml_library(std::string file) : file_(std::move(file)) {}

nvml_library::~nvml_library() {
  // NVML stays initialised for the life of the process (the system instance is never
  // destroyed); a test instance only drops its reference to the library.
  if (handle_)
    ::dlclose(handle_);
}

nvml_library& nvml_library::system() {
  // Leaked on purpose: clock samplers may still poll while static destructors run.
  static auto* lib = new nvml_library{"libnvidia-ml.so.1"};
  return *lib;
}

bool nvml_library::load() {
  if (tried_)
    return api_ != nullptr;
  tried_ = true;
  handle_ = ::dlopen(file_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = ::dlerror();
    problem_ = "no NVML: cannot load " + file_ + (why ? std::string{" ("} + why + ")" : "");
    return false;
  }
  auto a = std::make_unique<api>();
  // The _v2 names are the ones every current driver exports; the clocks-event query was
  // renamed in CUDA 12, and older drivers know only the throttle name.
  if (!bind(handle_, "nvmlInit_v2", a->init) || !bind(handle_, "nvmlErrorString", a->error_string)
      || !bind(handle_, "nvmlDeviceGetHandleByPciBusId_v2", a->by_pci)
      || !bind(handle_, "nvmlDeviceGetHandleByIndex_v2", a->by_index)
      || !bind(handle_, "nvmlDeviceGetClockInfo", a->clock)
      || !bind(handle_, "nvmlDeviceGetMaxClockInfo", a->max_clock)) {
    problem_ = "no NVML: " + file_ + " lacks the functions kiln needs";
    return false;
  }
  bind(handle_, "nvmlDeviceGetTemperature", a->temperature);
  bind(handle_, "nvmlDeviceGetPowerUsage", a->power);
  if (!bind(handle_, "nvmlDeviceGetCurrentClocksEventReasons", a->throttle))
    bind(handle_, "nvmlDeviceGetCurrentClocksThrottleReasons", a->throttle);
  bind(handle_, "nvmlDeviceGetCount_v2", a->count);
  bind(handle_, "nvmlDeviceGetUUID", a->uuid);
  bind(handle_, "nvmlDeviceGetIndex", a->index);
  bind(handle_, "nvmlDeviceGetMigMode", a->mig_mode);
  if (auto rc = a->init(); rc != nvml_success) {
    problem_ = "no NVML: nvmlInit failed: " + a->error(rc);
    return false;
  }
  api_ = std::move(a);
  return true;
}

bool nvml_library::available() {
  std::lock_guard<std::mutex> lock{mu_};
  return load();
}

std::string nvml_library::problem() {
  std::lock_guard<std::mutex> lock{mu_};
  load();
  return problem_;
}

gpu_reading nvml_library::read(const gpu_target& target) {
  gpu_reading r;
  const api* a = nullptr;
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (!load()) {
      r.problem = problem_;
      return r;
    }
    a = api_.get(); // immutable once loaded; NVML's own calls are thread-safe
  }
  if (target.index < 0) {
    r.problem = "not a GPU";
    return r;
  }
  nvml_device dev = nullptr;
  nvml_return rc = target.pci_bus_id.empty()
                       ? a->by_index(static_cast<unsigned>(target.index), &dev)
                       : a->by_pci(target.pci_bus_id.c_str(), &dev);
  if (rc != nvml_success) {
    r.problem = "NVML has no device "
                + (target.pci_bus_id.empty() ? "#" + std::to_string(target.index)
                                             : "at PCI " + target.pci_bus_id)
                + ": " + a->error(rc);
    return r;
  }
  unsigned v = 0;
  if ((rc = a->clock(dev, nvml_clock_sm, &v)) != nvml_success) {
    r.problem = "cannot read the SM clock: " + a->error(rc);
    return r;
  }
  r.readable = true;
  r.sm_mhz = static_cast<int32_t>(v);
  if (a->clock(dev, nvml_clock_mem, &v) == nvml_success)
    r.mem_mhz = static_cast<int32_t>(v);
  if (a->max_clock(dev, nvml_clock_sm, &v) == nvml_success)
    r.sm_max_mhz = static_cast<int32_t>(v);
  if (a->max_clock(dev, nvml_clock_mem, &v) == nvml_success)
    r.mem_max_mhz = static_cast<int32_t>(v);
  if (a->temperature && a->temperature(dev, nvml_temperature_gpu, &v) == nvml_success)
    r.temperature_c = static_cast<int32_t>(v);
  if (a->power && a->power(dev, &v) == nvml_success)
    r.power_w = v / 1000.0; // milliwatts
  unsigned long long mask = 0;
  if (a->throttle && a->throttle(dev, &mask) == nvml_success)
    r.throttle_reasons = mask;
  return r;
}

std::vector<physical_gpu> nvml_library::gpus() {
  std::vector<physical_gpu> out;
  const api* a = nullptr;
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (!load())
      return out;
    a = api_.get();
  }
  unsigned n = 0;
  if (!a->count || !a->uuid || a->count(&n) != nvml_success)
    return out;
  for (unsigned i = 0; i < n; ++i) {
    nvml_device dev = nullptr;
    char text[96] = {}; // NVML_DEVICE_UUID_V2_BUFFER_SIZE
    if (a->by_index(i, &dev) != nvml_success || a->uuid(dev, text, sizeof text) != nvml_success)
      continue;
    out.push_back({static_cast<int>(i), text});
  }
  return out;
}

int nvml_library::index_of(const std::string& pci_bus_id) {
  const api* a = nullptr;
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (!load())
      return -1;
    a = api_.get();
  }
  nvml_device dev = nullptr;
  unsigned index = 0;
  if (pci_bus_id.empty() || !a->index || a->by_pci(pci_bus_id.c_str(), &dev) != nvml_success
      || a->index(dev, &index) != nvml_success)
    return -1;
  return static_cast<int>(index);
}

bool nvml_library::mig_enabled(const std::string& pci_bus_id) {
  const api* a = nullptr;
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (!load())
      return false;
    a = api_.get();
  }
  nvml_device dev = nullptr;
  unsigned current = 0;
  unsigned pending = 0;
  return !pci_bus_id.empty() && a->mig_mode && a->by_pci(pci_bus_id.c_str(), &dev) == nvml_success
         && a->mig_mode(dev, &current, &pending) == nvml_success && current == 1;
}

// -- host readings -------------------------------------------------------------------------------

host_cpu_times parse_proc_stat(std::string_view text) {
  host_cpu_times t;
  std::istringstream in{std::string{text}};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0)
      continue;
    if (line.size() > 3 && line[3] >= '0' && line[3] <= '9') {
      ++t.cores;
      continue;
    }
    if (line.size() > 3 && line[3] != ' ')
      continue;
    // user nice system idle iowait irq softirq steal; guest and guest_nice are already counted
    // in user and nice.
    std::istringstream fields{line.substr(3)};
    uint64_t v[8] = {};
    int n = 0;
    while (n < 8 && (fields >> v[n]))
      ++n;
    if (n < 4)
      return {};
    for (int i = 0; i < n; ++i)
      t.total += v[i];
    t.busy = t.total - v[3] - (n > 4 ? v[4] : 0);
    t.readable = true;
  }
  if (t.cores == 0)
    t.cores = 1; // a kernel that lists no cpuN lines has at least one
  return t;
}

double parse_loadavg(std::string_view text) {
  std::string s{text};
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0)
    return -1;
  return v;
}

double cores_busy(const host_cpu_times& before, const host_cpu_times& after) {
  if (!before.readable || !after.readable || after.total <= before.total
      || after.busy < before.busy)
    return -1;
  // The aggregate line sums every core, so the elapsed jiffies of one core are total / cores.
  double elapsed = static_cast<double>(after.total - before.total) / after.cores;
  return static_cast<double>(after.busy - before.busy) / elapsed;
}

std::string drift_problem(const clock_summary& s) {
  if (s.readings == 0)
    return {};
  std::string out;
  if (s.sm_max_mhz > 0 && s.sm_min_mhz > 0
      && s.sm_max_mhz - s.sm_min_mhz > drift_sm_share * s.sm_max_mhz) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "the SM clock moved between %d and %d MHz (%.1f %%, more than %.0f %%) while "
                  "timing",
                  s.sm_min_mhz, s.sm_max_mhz, 100.0 * (s.sm_max_mhz - s.sm_min_mhz) / s.sm_max_mhz,
                  100 * drift_sm_share);
    out = text;
  }
  if (auto slow = s.throttle_reasons & drift_throttle_mask) {
    std::string names;
    for (const auto& n : throttle_names(slow))
      names += (names.empty() ? "" : ", ") + n;
    out += (out.empty() ? "" : "; ") + std::string{"the GPU was slowed down ("} + names
           + ") while timing";
  }
  return out;
}

// -- clock_sampler -------------------------------------------------------------------------------

clock_sampler::clock_sampler(nvml_library& lib, gpu_target target, std::chrono::milliseconds period,
                             host_source host)
    : host_(std::move(host)) {
  host_samples_.push_back(read_host());
  if (target.index < 0 || !lib.available())
    return;
  thread_ = std::thread{[this, &lib, target, period] { poll(lib, target, period); }};
}

clock_sampler::host_sample clock_sampler::read_host() const {
  auto cpu = parse_proc_stat(read_small_file(host_.proc_stat));
  auto load = parse_loadavg(read_small_file(host_.loadavg));
  return {clock::now(), cpu, load};
}

clock_sampler::clock_sampler(const std::string& device)
    : clock_sampler(nvml_library::system(), gpu_target_for(device)) {}

clock_sampler::~clock_sampler() {
  stop();
}

void clock_sampler::poll(nvml_library& lib, gpu_target target, std::chrono::milliseconds period) {
  std::unique_lock<std::mutex> lock{mu_};
  while (!stopping_) {
    lock.unlock();
    auto r = lib.read(target);
    auto at = clock::now();
    auto host = read_host();
    lock.lock();
    host_samples_.push_back(host);
    if (!r.readable)
      return; // it will not get better within one runner's life
    samples_.push_back({at, r.sm_mhz, r.mem_mhz, r.temperature_c, r.power_w, r.throttle_reasons});
    cv_.wait_for(lock, period, [this] { return stopping_; });
  }
}

void clock_sampler::stop() {
  {
    std::unique_lock<std::mutex> lock{mu_};
    if (!stopping_) {
      stopped_at_ = clock::now();
      stopping_ = true;
      lock.unlock();
      auto host = read_host();
      lock.lock();
      host_samples_.push_back(host);
    }
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

clock_summary clock_sampler::summary(clock::time_point from, clock::time_point to) {
  std::lock_guard<std::mutex> lock{mu_};
  clock_summary out;
  std::vector<const sample*> in;
  for (const auto& s : samples_)
    if (s.at >= from && s.at <= to)
      in.push_back(&s);
  if (in.empty())
    for (const auto& s : samples_)
      in.push_back(&s);
  if (!in.empty()) {
    std::vector<int32_t> sm, mem;
    std::vector<double> power;
    out.sm_min_mhz = out.sm_max_mhz = in.front()->sm_mhz;
    for (const auto* s : in) {
      sm.push_back(s->sm_mhz);
      mem.push_back(s->mem_mhz);
      power.push_back(s->power_w);
      out.sm_min_mhz = std::min(out.sm_min_mhz, s->sm_mhz);
      out.sm_max_mhz = std::max(out.sm_max_mhz, s->sm_mhz);
      out.temperature_c = std::max(out.temperature_c, s->temperature_c);
      out.throttle_reasons |= s->throttle_reasons & ~uint64_t{0x1}; // all but gpu_idle
    }
    out.sm_mhz = median_of(std::move(sm));
    out.mem_mhz = median_of(std::move(mem));
    out.power_w = median_of(std::move(power));
    out.readings = static_cast<int32_t>(in.size());
  }
  // The poll thread and stop() read the host outside the lock, so two readings can arrive out
  // of order; the bracketing below wants them in time order.
  std::sort(host_samples_.begin(), host_samples_.end(),
            [](const host_sample& a, const host_sample& b) { return a.at < b.at; });
  // The pair that brackets the window, or the nearest inside it.
  const host_sample* first = nullptr;
  const host_sample* last = nullptr;
  for (const auto& h : host_samples_) {
    if (h.at <= from || !first)
      first = &h;
    if (!last || last->at < to)
      last = &h;
  }
  if (first && last && first != last) {
    out.host_busy = cores_busy(first->cpu, last->cpu);
    out.load_avg = last->load_avg;
  } else if (last) {
    out.load_avg = last->load_avg;
  }
  return out;
}

clock_summary clock_sampler::summary() {
  return summary(clock::time_point::min(), clock::time_point::max());
}

clock_summary clock_sampler::last(double span_ms) {
  stop();
  // Writing result.json and leaving take a moment after the loop; 250 ms covers that.
  auto span = std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double, std::milli>(std::max(0.0, span_ms) + 250.0));
  return summary(stopped_at_ - span, stopped_at_);
}

timing_stats with_clocks(timing_stats s, clock_sampler& clocks, double span_ms) {
  auto c = clocks.last(span_ms);
  s.sm_clock_mhz = c.sm_mhz;
  s.mem_clock_mhz = c.mem_mhz;
  s.sm_min_mhz = c.sm_min_mhz;
  s.sm_max_mhz = c.sm_max_mhz;
  s.temperature_c = c.temperature_c;
  s.power_w = c.power_w;
  s.host_busy = c.host_busy;
  s.load_avg = c.load_avg;
  return s;
}

} // namespace kiln
