// NVML through dlopen: where the library is missing or is not NVML, every reading says
// "unreadable" and why, and nothing fails; on a GPU host the real one answers. A fake NVML
// (tests/gpu/fake_nvml.cpp) answers scripted readings, so the summaries are checked anywhere.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <dlfcn.h>
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

namespace {

// The fake's row layout (tests/gpu/fake_nvml.cpp).
struct fake_row {
  unsigned sm_mhz;
  unsigned mem_mhz;
  unsigned temperature_c;
  unsigned power_mw;
  unsigned long long throttle;
};

// The fake NVML, scripted with `rows`; a second dlopen of the file the nvml_library loads
// shares its state.
struct fake_nvml {
  explicit fake_nvml(const std::vector<fake_row>& rows) {
    handle = dlopen(KILN_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(handle != nullptr);
    auto script =
        reinterpret_cast<void (*)(const fake_row*, int)>(dlsym(handle, "kiln_fake_nvml_script"));
    reads = reinterpret_cast<int (*)()>(dlsym(handle, "kiln_fake_nvml_reads"));
    REQUIRE(script != nullptr);
    REQUIRE(reads != nullptr);
    script(rows.data(), static_cast<int>(rows.size()));
  }
  ~fake_nvml() { dlclose(handle); }
  void* handle = nullptr;
  int (*reads)() = nullptr;
};

// Polls until the fake has answered every row (the sampler's thread then ends by itself, at
// the first unreadable reading); bounded, so a broken sampler fails instead of hanging.
void wait_for_script(kiln::clock_sampler& sampler, size_t rows) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sampler.summary().readings < static_cast<int32_t>(rows)
         && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
}

std::string write_file(const std::string& name, const std::string& text) {
  auto dir = std::string{KILN_TEST_TMP} + "/nvml";
  std::filesystem::create_directories(dir);
  auto path = dir + "/" + name;
  std::ofstream{path} << text;
  return path;
}

} // namespace

TEST_CASE("a sampler keeps temperature, power and throttle reasons of every reading", "[nvml]") {
  // Clocks 1980 -> 1890 (4.5 %), a gpu_idle reading (ignored), then a power cap.
  std::vector<fake_row> rows = {{1980, 3201, 61, 400000, 0x0},
                                {1950, 3201, 64, 520000, 0x1},
                                {1890, 3201, 70, 690000, 0x4},
                                {1965, 2619, 66, 610000, 0x0},
                                {1980, 3201, 65, 450000, 0x0}};
  fake_nvml fake{rows};
  kiln::nvml_library lib{KILN_FAKE_NVML};
  REQUIRE(lib.available());
  kiln::clock_sampler sampler{lib, {"", 0}, std::chrono::milliseconds(1)};
  wait_for_script(sampler, rows.size());
  sampler.stop();
  auto s = sampler.summary();
  CHECK(s.readings == 5);
  CHECK(fake.reads() == 5);
  CHECK(s.sm_mhz == 1965);
  CHECK(s.mem_mhz == 3201);
  CHECK(s.sm_min_mhz == 1890);
  CHECK(s.sm_max_mhz == 1980);
  CHECK(s.temperature_c == 70);
  CHECK(s.power_w == Approx(520.0));
  CHECK(s.throttle_reasons == 0x4);
  auto why = kiln::drift_problem(s);
  CHECK_THAT(why, Catch::Contains("SM clock moved between 1890 and 1980 MHz (4.5 %"));
  CHECK_THAT(why, Catch::Contains("slowed down (sw_power_cap)"));
  // The existing readers keep working on the same readings.
  kiln::timing_stats t;
  t = kiln::with_clocks(t, sampler, 1e7);
  CHECK(t.sm_clock_mhz == 1965);
  CHECK(t.mem_clock_mhz == 3201);
}

TEST_CASE("a steady window has no drift problem, and gpu_idle alone is not one", "[nvml]") {
  // 1980 -> 1935 MHz is 2.3 %, inside the 3 % allowed.
  std::vector<fake_row> rows = {
      {1980, 3201, 50, 300000, 0x1}, {1935, 3201, 52, 310000, 0x1}, {1965, 3201, 51, 305000, 0x0}};
  fake_nvml fake{rows};
  kiln::nvml_library lib{KILN_FAKE_NVML};
  kiln::clock_sampler sampler{lib, {"", 0}, std::chrono::milliseconds(1)};
  wait_for_script(sampler, rows.size());
  auto s = sampler.last(1e7);
  CHECK(s.readings == 3);
  CHECK(s.throttle_reasons == 0);
  CHECK(s.sm_min_mhz == 1935);
  CHECK(kiln::drift_problem(s).empty());
}

TEST_CASE("drift_problem names each reason, and says nothing without readings", "[nvml]") {
  kiln::clock_summary s;
  CHECK(kiln::drift_problem(s).empty());
  s.throttle_reasons = 0x40; // readings 0: nothing was readable, nothing to say
  CHECK(kiln::drift_problem(s).empty());
  s.readings = 4;
  s.sm_min_mhz = s.sm_max_mhz = s.sm_mhz = 1755;
  CHECK(kiln::drift_problem(s) == "the GPU was slowed down (hw_thermal_slowdown) while timing");
  s.throttle_reasons = 0x8 | 0x80 | 0x10; // sync_boost is not a slowdown
  CHECK(kiln::drift_problem(s)
        == "the GPU was slowed down (hw_slowdown, hw_power_brake_slowdown) while timing");
  s.throttle_reasons = 0x2 | 0x10 | 0x100;
  CHECK(kiln::drift_problem(s).empty());
  s.sm_min_mhz = 1900; // to 1980: 4.0 %
  s.sm_max_mhz = 1980;
  CHECK(kiln::drift_problem(s)
        == "the SM clock moved between 1900 and 1980 MHz (4.0 %, more than 3 %) while timing");
}

TEST_CASE("/proc/stat and /proc/loadavg are parsed, and cores busy computed", "[nvml]") {
  auto a = kiln::parse_proc_stat("cpu  100 0 50 800 50 0 0 0 0 0\n"
                                 "cpu0 50 0 25 400 25 0 0 0 0 0\n"
                                 "cpu1 50 0 25 400 25 0 0 0 0 0\n"
                                 "intr 12345\nctxt 999\n");
  REQUIRE(a.readable);
  CHECK(a.cores == 2);
  CHECK(a.total == 1000);
  CHECK(a.busy == 150);
  // 200 jiffies later (100 per core), 150 of them busy: 1.5 cores.
  auto b = kiln::parse_proc_stat("cpu  220 0 80 840 60 0 0 0 0 0\ncpu0 1\ncpu1 1\n");
  CHECK(kiln::cores_busy(a, b) == Approx(1.5));
  CHECK(kiln::cores_busy(a, a) == -1);
  CHECK(kiln::cores_busy(b, a) == -1);
  CHECK_FALSE(kiln::parse_proc_stat("").readable);
  CHECK_FALSE(kiln::parse_proc_stat("cpu0 1 2 3 4\n").readable);
  CHECK_FALSE(kiln::parse_proc_stat("cpu  1 2\n").readable);
  CHECK(kiln::cores_busy(kiln::parse_proc_stat(""), b) == -1);
  CHECK(kiln::parse_loadavg("3.52 2.10 1.00 3/412 12345\n") == Approx(3.52));
  CHECK(kiln::parse_loadavg("") == -1);
  CHECK(kiln::parse_loadavg("busy") == -1);
}

TEST_CASE("a CPU sampler reads the host at its start and stop, without NVML", "[nvml]") {
  auto stat =
      write_file("stat", "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 x\ncpu1 x\ncpu2 x\ncpu3 x\n");
  auto load = write_file("loadavg", "0.50 0.40 0.30 1/100 42\n");
  kiln::nvml_library lib{"libkiln-no-such-nvml.so.1"};
  kiln::clock_sampler sampler{lib, {}, std::chrono::milliseconds(1), {stat, load}};
  // One reading so far: no span to measure the host over.
  CHECK(sampler.summary().host_busy == -1);
  CHECK(sampler.summary().load_avg == Approx(0.5));
  // 400 jiffies later (100 per core of 4), 300 of them busy: 3 cores.
  write_file("stat", "cpu  300 0 150 850 100 0 0 0 0 0\ncpu0 x\ncpu1 x\ncpu2 x\ncpu3 x\n");
  write_file("loadavg", "2.75 1.00 0.50 3/100 42\n");
  auto s = sampler.last(100);
  CHECK(s.readings == 0);
  CHECK(s.host_busy == Approx(3.0));
  CHECK(s.load_avg == Approx(2.75));
  CHECK(kiln::drift_problem(s).empty());
}

TEST_CASE("a sampler on the real /proc sees a busy share within the host's cores", "[nvml]") {
  kiln::clock_sampler sampler{"cpu"};
  // Work until the kernel's CPU accounting has moved on (a jiffy or more), not for a set time.
  auto first = kiln::parse_proc_stat([] {
    std::ifstream in{"/proc/stat"};
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }());
  REQUIRE(first.readable);
  volatile uint64_t spin = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    for (int i = 0; i < 1000000; ++i)
      spin = spin + i;
    std::ifstream in{"/proc/stat"};
    std::ostringstream text;
    text << in.rdbuf();
    if (kiln::parse_proc_stat(text.str()).total > first.total + 2 * first.cores
        || std::chrono::steady_clock::now() > until)
      break;
  }
  auto s = sampler.last(0);
  CHECK(s.host_busy >= 0);
  CHECK(s.host_busy <= first.cores + 0.01);
  CHECK(s.load_avg >= 0);
}
