// NVML through dlopen: where the library is missing or is not NVML, every reading says
// "unreadable" and why, and nothing fails; on a GPU host the real one answers.

#include <chrono>
#include <thread>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "gpu/devices.hpp"
#include "gpu/nvml.hpp"

namespace {

bool host_has_gpu() {
  return access("/dev/nvidiactl", F_OK) == 0;
}

} // namespace

TEST_CASE("a missing NVML makes every reading unreadable, with the reason", "[nvml]") {
  kiln::nvml_library lib{"libkiln-no-such-nvml.so.1"};
  CHECK_FALSE(lib.available());
  CHECK_THAT(lib.problem(), Catch::StartsWith("no NVML: cannot load libkiln-no-such-nvml.so.1"));
  auto r = lib.read({"0000:01:00.0", 0});
  CHECK_FALSE(r.readable);
  CHECK(r.problem == lib.problem());
  CHECK(r.sm_mhz == 0);
  CHECK(r.mem_mhz == 0);
}

TEST_CASE("a library that is not NVML is refused by name", "[nvml]") {
  // libm is on every glibc system and exports none of NVML's functions.
  kiln::nvml_library lib{"libm.so.6"};
  CHECK_FALSE(lib.available());
  CHECK(lib.problem() == "no NVML: libm.so.6 lacks the functions kiln needs");
  CHECK_FALSE(lib.read({"", 0}).readable);
}

TEST_CASE("a clock sampler without NVML starts nothing and summarises to zeros", "[nvml]") {
  kiln::nvml_library lib{"libkiln-no-such-nvml.so.1"};
  auto t0 = std::chrono::steady_clock::now();
  kiln::clock_sampler sampler{lib, {"", 0}, std::chrono::milliseconds(1000)};
  sampler.stop();
  auto c = sampler.last(500);
  CHECK(c.sm_mhz == 0);
  CHECK(c.mem_mhz == 0);
  CHECK(c.readings == 0);
  // No polling thread to wait for: stopping does not take a polling period.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(500));
  kiln::timing_stats s;
  s.median_ms = 1;
  s = kiln::with_clocks(s, sampler, 100);
  CHECK(s.sm_clock_mhz == 0);
  CHECK(s.median_ms == 1);
}

TEST_CASE("the CPU is not a GPU target", "[nvml]") {
  CHECK(kiln::gpu_target_for("cpu").index == -1);
  CHECK(kiln::gpu_target_for("cuda:x").index == -1);
  auto t = kiln::gpu_target_for("cuda:3");
  CHECK(t.index == 3);
  kiln::clock_sampler cpu{"cpu"};
  CHECK(cpu.summary().readings == 0);
  CHECK_FALSE(kiln::nvml_library::system().read(kiln::gpu_target_for("cpu")).readable);
}

TEST_CASE("throttle bits are named", "[nvml]") {
  CHECK(kiln::throttle_names(0).empty());
  CHECK(kiln::throttle_names(0x1) == std::vector<std::string>{"gpu_idle"});
  CHECK(kiln::throttle_names(0x4 | 0x40)
        == std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown"});
  CHECK(kiln::throttle_names(0x8000) == std::vector<std::string>{"other"});
}

TEST_CASE("the system's NVML matches the host", "[nvml]") {
  auto& nvml = kiln::nvml_library::system();
  if (!host_has_gpu()) {
    CHECK_FALSE(nvml.available());
    CHECK_THAT(nvml.problem(), Catch::StartsWith("no NVML"));
    return;
  }
  // A GPU host with the driver's user-space library: clocks of every CUDA device, found by
  // its PCI bus id, and a sampler that collects them while something runs.
  REQUIRE(nvml.available());
  for (const auto& d : kiln::discover_devices()) {
    if (d.id == "cpu")
      continue;
    INFO(d.id << " at " << d.pci_bus_id);
    CHECK_FALSE(d.pci_bus_id.empty());
    auto r = nvml.read(kiln::gpu_target_for(d.id));
    INFO(r.problem);
    CHECK(r.readable);
    CHECK(r.sm_mhz > 0);
    CHECK(r.sm_max_mhz >= r.sm_mhz);
    kiln::clock_sampler sampler{nvml, kiln::gpu_target_for(d.id), std::chrono::milliseconds(5)};
    // The sampler polls on its own thread; this only waits for its first readings.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (sampler.summary().readings < 3 && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
    auto c = sampler.last(1000);
    CHECK(c.sm_mhz > 0);
    CHECK(c.mem_mhz > 0);
  }
}
