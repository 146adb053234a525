#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>

#include "gpu/build_cache.hpp"
#include "gpu/device_lock.hpp"
#include "gpu/devices.hpp"
#include "gpu/json_text.hpp"
#include "gpu/nvml.hpp"
#include "gpu/sandbox.hpp"
#include "tools/cli.hpp"

namespace kiln::cli {

namespace {

/// The clocks of one device: NVML for a GPU, cpufreq or /proc/cpuinfo for the CPU.
gpu_reading clocks_of(const device_info& d) {
  if (d.id == "cpu") {
    gpu_reading r;
    r.readable = d.clock_mhz > 0;
    r.sm_mhz = d.clock_mhz;
    r.sm_max_mhz = d.max_clock_mhz;
    if (!r.readable)
      r.problem = "no clock in cpufreq or /proc/cpuinfo";
    return r;
  }
  if (d.test_fake) {
    gpu_reading r;
    r.problem = std::string{"a fake GPU of the test hook "} + test_fake_gpus_env;
    return r;
  }
  gpu_target t;
  t.index = d.physical_index >= 0 ? d.physical_index : std::stoi(d.id.substr(5));
  t.pci_bus_id = d.pci_bus_id;
  return nvml_library::system().read(t);
}

/// Who holds the device's host-wide lock now (another kiln process), if anyone.
std::optional<lock_holder> holder_of(const device_info& d, const std::string& lock_dir) {
  return lock_dir.empty() ? std::nullopt : device_lock_holder(d, lock_dir);
}

std::string holder_json(const device_info& d, const std::optional<lock_holder>& h) {
  if (!h)
    return "null";
  std::ostringstream o;
  o << "{\"pid\": " << (h->pid > 0 ? std::to_string(h->pid) : "null")
    << ", \"command\": " << (h->command.empty() ? "null" : json_quote(h->command))
    << ", \"user\": " << (h->user.empty() ? "null" : json_quote(h->user))
    << ", \"started\": " << (h->started > 0 ? std::to_string(h->started) : "null")
    << ", \"text\": " << json_quote(describe_holder(d.id, *h)) << "}";
  return o.str();
}

std::string mhz_pair(int cur, int max) {
  std::string s = cur > 0 ? std::to_string(cur) : "?";
  if (max > 0)
    s += "/" + std::to_string(max);
  return s + " MHz";
}

std::string clocks_text(const device_info& d, const gpu_reading& r) {
  if (!r.readable)
    return "clocks: unreadable (" + r.problem + ")";
  if (d.id == "cpu")
    return "clock " + mhz_pair(r.sm_mhz, r.sm_max_mhz);
  std::ostringstream o;
  o << "sm " << mhz_pair(r.sm_mhz, r.sm_max_mhz) << ", mem " << mhz_pair(r.mem_mhz, r.mem_max_mhz);
  if (r.temperature_c > 0)
    o << ", " << r.temperature_c << " C";
  if (r.power_w > 0)
    o << ", " << static_cast<int>(r.power_w + 0.5) << " W";
  auto reasons = throttle_names(r.throttle_reasons);
  if (!reasons.empty()) {
    o << ", throttle:";
    for (const auto& name : reasons)
      o << " " << name;
  }
  return o.str();
}

std::string clocks_json(const device_info& d, const gpu_reading& r) {
  std::ostringstream o;
  if (!r.readable) {
    o << "{\"readable\": false, \"reason\": " << json_quote(r.problem) << "}";
    return o.str();
  }
  auto num = [](int v) { return v > 0 ? std::to_string(v) : std::string{"null"}; };
  if (d.id == "cpu") {
    o << "{\"readable\": true, \"mhz\": " << num(r.sm_mhz) << ", \"max_mhz\": " << num(r.sm_max_mhz)
      << "}";
    return o.str();
  }
  o << "{\"readable\": true, \"sm_mhz\": " << num(r.sm_mhz)
    << ", \"sm_max_mhz\": " << num(r.sm_max_mhz) << ", \"mem_mhz\": " << num(r.mem_mhz)
    << ", \"mem_max_mhz\": " << num(r.mem_max_mhz)
    << ", \"temperature_c\": " << num(r.temperature_c)
    << ", \"power_w\": " << (r.power_w > 0 ? json_number(r.power_w) : "null")
    << ", \"throttle_reasons\": [";
  auto reasons = throttle_names(r.throttle_reasons);
  for (size_t i = 0; i < reasons.size(); ++i)
    o << (i ? ", " : "") << json_quote(reasons[i]);
  o << "]}";
  return o.str();
}

} // namespace

int devices(bool json) {
  auto found = discover_devices();
  std::string lock_dir;
  try {
    lock_dir = device_lock_dir(resolve_cache_dir(""));
  } catch (const std::exception&) {
    lock_dir = device_lock_dir("");
  }
  const char* mask = std::getenv("CUDA_VISIBLE_DEVICES");
  if (json) {
    std::ostringstream out;
    out << "[";
    for (size_t i = 0; i < found.size(); ++i) {
      auto& d = found[i];
      out << (i ? ",\n " : "") << "{\"id\": " << json_quote(d.id)
          << ", \"name\": " << json_quote(d.name) << ", \"memory_bytes\": " << d.memory_bytes
          << ", \"multiprocessors\": " << d.multiprocessors
          << ", \"capability\": " << (d.capability.empty() ? "null" : json_quote(d.capability))
          << ", \"pci_bus_id\": " << (d.pci_bus_id.empty() ? "null" : json_quote(d.pci_bus_id))
          << ", \"physical_index\": "
          << (d.physical_index >= 0 ? std::to_string(d.physical_index) : "null")
          << ", \"uuid\": " << (d.uuid.empty() ? "null" : json_quote(d.uuid))
          << ", \"runner_visible_devices\": " << json_quote(d.runner_visible)
          << ", \"test_fake\": " << (d.test_fake ? "true" : "false")
          << ", \"held_by\": " << holder_json(d, holder_of(d, lock_dir))
          << ", \"clocks\": " << clocks_json(d, clocks_of(d)) << "}";
    }
    out << "]\n";
    std::cout << out.str();
    return 0;
  }
  std::printf("CUDA_VISIBLE_DEVICES: %s\n", mask == nullptr
                                                ? "unset (every GPU of the host)"
                                                : (*mask == '\0' ? "empty (no GPU)" : mask));
  std::printf("%-8s %-40s %10s %6s %-10s %s\n", "device", "name", "memory", "units", "capability",
              "clocks (current/max)");
  for (auto& d : found) {
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f GiB",
                  static_cast<double>(d.memory_bytes) / (1024.0 * 1024.0 * 1024.0));
    std::printf("%-8s %-40s %10s %6d %-10s %s\n", d.id.c_str(), d.name.c_str(), mem,
                d.multiprocessors, d.capability.empty() ? "-" : d.capability.c_str(),
                clocks_text(d, clocks_of(d)).c_str());
    if (d.id != "cpu") {
      // What every process calls this GPU, and what its runners are given.
      std::string where = d.physical_index >= 0 ? "physical GPU " + std::to_string(d.physical_index)
                                                : std::string{"physical GPU ?"};
      if (!d.uuid.empty())
        where += ", " + d.uuid;
      if (!d.pci_bus_id.empty())
        where += ", PCI " + d.pci_bus_id;
      std::printf("%-8s %s; runners get CUDA_VISIBLE_DEVICES=%s\n", "", where.c_str(),
                  d.runner_visible.c_str());
    }
    if (auto h = holder_of(d, lock_dir))
      std::printf("%-8s %s\n", "", describe_holder(d.id, *h).c_str());
  }
  auto& nvml = nvml_library::system();
  std::printf("nvml: %s\n", nvml.available() ? "loaded" : nvml.problem().c_str());
  const runner_identity id = identity_for("");
  std::printf("sandbox: %s; user: %s\n", probe_sandbox().description().c_str(),
              id.available ? id.name.c_str()
                           : ("the invoking user's (" + id.why_not + ")").c_str());
  std::printf("device locks: %s\n", lock_dir.empty() ? "none" : lock_dir.c_str());
  return 0;
}

} // namespace kiln::cli
