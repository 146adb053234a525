#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/devices.hpp"
#include "gpu/nvml.hpp"
#include "gpu/runner.hpp"

namespace {

// The driver creates this node; without it no CUDA device can be visible.
bool host_has_gpu() {
  return access("/dev/nvidiactl", F_OK) == 0;
}

} // namespace

TEST_CASE("discover_devices lists the CPU last, once", "[devices]") {
  auto devices = kiln::discover_devices();
  REQUIRE_FALSE(devices.empty());
  const auto& cpu = devices.back();
  CHECK(cpu.id == "cpu");
  CHECK_FALSE(cpu.name.empty());
  CHECK(cpu.multiprocessors >= 1);
  CHECK(cpu.memory_bytes > 0);
  for (size_t i = 0; i + 1 < devices.size(); ++i)
    CHECK(devices[i].id == "cuda:" + std::to_string(i));
}

TEST_CASE("discover_devices without a GPU finds only the CPU", "[devices]") {
  if (host_has_gpu())
    return; // nothing to check on a GPU host
  auto devices = kiln::discover_devices();
  REQUIRE(devices.size() == 1);
  CHECK(devices.front().id == "cpu");
}

TEST_CASE("select_devices resolves auto and cpu", "[devices]") {
  auto all = kiln::discover_devices();
  auto chosen = kiln::select_devices({"auto"});
  REQUIRE_FALSE(chosen.empty());
  if (all.size() == 1) {
    REQUIRE(chosen.size() == 1);
    CHECK(chosen.front().id == "cpu");
  } else {
    CHECK(chosen.size() == all.size() - 1);
    for (auto& d : chosen)
      CHECK(d.id != "cpu");
  }
  auto cpu = kiln::select_devices({"cpu"});
  REQUIRE(cpu.size() == 1);
  CHECK(cpu.front().id == "cpu");
}

TEST_CASE("select_devices refuses devices this host lacks", "[devices]") {
  CHECK_THROWS_WITH(kiln::select_devices({"cuda:99"}),
                    Catch::Contains("device cuda:99 not found") && Catch::Contains("cpu"));
  if (!host_has_gpu())
    CHECK_THROWS_WITH(kiln::select_devices({"cuda:0"}),
                      "device cuda:0 not found; this host has: cpu");
  CHECK_THROWS(kiln::select_devices({}));
  CHECK_THROWS(kiln::select_devices({"cpu", "cpu"}));
}

// -- CUDA_VISIBLE_DEVICES: kiln's cuda:N is the N-th GPU of its own mask -----------------------

namespace {

const std::vector<kiln::physical_gpu> four_gpus = {
    {0, "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1"},
    {1, "GPU-9e8d35e3-a134-0fdd-0e01-23811fdbd293"},
    {2, "GPU-e429a63e-c61c-4795-b757-5132caeb8e70"},
    {3, "GPU-eee1dfbc-0a0f-6ad8-5ff6-dc942a8b9d98"},
};

/// The physical positions a mask makes visible, cuda:0 first.
std::vector<int> shown(const char* mask) {
  std::vector<int> out;
  for (const auto& v : kiln::visible_gpus(mask, four_gpus))
    out.push_back(v.physical);
  return out;
}

using ints = std::vector<int>;
using strings = std::vector<std::string>;

/// Sets an environment variable for one scope (null: unset), then puts back what was there.
struct scoped_env {
  std::string name;
  std::optional<std::string> old;
  scoped_env(const char* n, const char* value) : name(n) {
    if (const char* was = std::getenv(n))
      old = was;
    if (value)
      ::setenv(n, value, 1);
    else
      ::unsetenv(n);
  }
  ~scoped_env() {
    if (old)
      ::setenv(name.c_str(), old->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

} // namespace

TEST_CASE("an unset mask shows every GPU in order, an empty one none", "[devices][mask]") {
  CHECK(shown(nullptr) == ints{0, 1, 2, 3});
  for (const auto& v : kiln::visible_gpus(nullptr, four_gpus))
    CHECK(v.entry.empty());
  CHECK(shown("").empty());
  CHECK(kiln::visible_gpus(nullptr, {}).empty());
}

TEST_CASE("index masks make the N-th entry kiln's cuda:N", "[devices][mask]") {
  CHECK(shown("2,3") == ints{2, 3});
  CHECK(shown("3,1") == ints{3, 1});
  auto v = kiln::visible_gpus("2,3", four_gpus);
  REQUIRE(v.size() == 2);
  CHECK(v[0].entry == "2");
  CHECK(v[1].entry == "3");
  // As strtoul reads them, after leading blanks: `1gpu` is 1, `+3` is 3, `-0` is 0.
  CHECK(shown("1gpu2,2ampere") == ints{1, 2});
  CHECK(shown(" 2, +3, -0") == ints{2, 3, 0});
  CHECK(kiln::mask_entries(" 2, +3, -0") == strings{"2", "3", "0"});
}

TEST_CASE("an invalid entry ends the list, a repeated device empties it", "[devices][mask]") {
  CHECK(shown("0,2,-1,1") == ints{0, 2}); // a negative index
  CHECK(shown("1,7,0") == ints{1});       // past the last GPU
  CHECK(shown("3,two,1") == ints{3});     // not a number
  CHECK(shown("one,two,3").empty());
  CHECK(shown("0,,1") == ints{0}); // an empty entry
  CHECK(shown("0,1,0").empty());   // CUDA then sees no device at all
  CHECK(shown("0,1,+0").empty());
  CHECK(kiln::mask_entries("0,1,0").empty());
}

TEST_CASE("UUIDs and prefixes that match one GPU pick it; others end the list", "[devices][mask]") {
  CHECK(shown("GPU-e429a63e-c61c-4795-b757-5132caeb8e70") == ints{2});
  CHECK(shown("GPU-9e8d35e3,GPU-eee1") == ints{1, 3});
  auto v = kiln::visible_gpus("GPU-9e8d35e3", four_gpus);
  REQUIRE(v.size() == 1);
  CHECK(v[0].entry == "GPU-9e8d35e3");                      // the mask's own words
  CHECK(shown("GPU-9e8d35e3,GPU-e,GPU-9942") == ints{1});   // GPU-e is ambiguous
  CHECK(shown("GPU-9e8d35e3,GPU-123,GPU-9942") == ints{1}); // GPU-123 matches none
  CHECK(shown("GPU-123,GPU-9e8d35e3").empty());
  CHECK(shown("GPU-9e8d35e3, 2") == ints{1});            // an index ends a UUID list
  CHECK(shown("GPU-9e8d35e3,GPU-9942,GPU-9e8").empty()); // GPU 1 twice
  CHECK(shown("GPU-9e8d35e3,GPU-9e8d35e3").empty());
  CHECK(shown("2,GPU-9e8d35e3") == ints{2}); // and a UUID ends an index list
}

TEST_CASE("MIG entries are kept as opaque ids", "[devices][mask]") {
  auto v = kiln::visible_gpus("MIG-89c850dc-5cf8-5e11-9d28-7b5d1e4bb1d8,MIG-0a1b", four_gpus);
  REQUIRE(v.size() == 2);
  CHECK(v[0].physical == -1);
  CHECK(v[0].entry == "MIG-89c850dc-5cf8-5e11-9d28-7b5d1e4bb1d8");
  CHECK(v[1].entry == "MIG-0a1b");
  CHECK(kiln::visible_gpus("MIG-GPU-9e8d35e3/1/0", four_gpus).front().entry
        == "MIG-GPU-9e8d35e3/1/0"); // the older form, as it is
  CHECK(kiln::visible_gpus("MIG-0a1b,0", four_gpus).size() == 1);
  CHECK(kiln::visible_gpus("MIG-0a1b,MIG-0a1b", four_gpus).empty());
  CHECK(kiln::mask_entries("MIG-0a1b,GPU-9e8d") == strings{"MIG-0a1b"});
  CHECK(kiln::mask_entries(nullptr).empty());
}

TEST_CASE("16 UUID bytes read as nvidia-smi writes them", "[devices][mask]") {
  const unsigned char bytes[16] = {0x89, 0x32, 0xf9, 0x37, 0xd7, 0x2c, 0x41, 0x06,
                                   0xc1, 0x2f, 0x20, 0xbd, 0x9f, 0xae, 0xd9, 0xf6};
  CHECK(kiln::format_uuid(bytes) == "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6");
  CHECK(kiln::format_uuid(bytes, "MIG-") == "MIG-8932f937-d72c-4106-c12f-20bd9faed9f6");
  const unsigned char none[16] = {};
  CHECK(kiln::format_uuid(none).empty());
}

TEST_CASE("the test hook's fake GPUs are masked like real ones; their runners get the UUID and "
          "the CPU",
          "[devices][mask]") {
  const char* a = "GPU-0a0a0a0a-0000-4000-8000-00000000000a";
  const char* b = "GPU-0b0b0b0b-0000-4000-8000-00000000000b";
  const char* c = "GPU-0c0c0c0c-0000-4000-8000-00000000000c";
  const std::string list = std::string{a} + "," + b + "," + c;
  scoped_env fake{kiln::test_fake_gpus_env, list.c_str()};
  {
    scoped_env mask{"CUDA_VISIBLE_DEVICES", "2,0"};
    auto all = kiln::discover_devices();
    REQUIRE(all.size() == 3);
    CHECK(all[0].id == "cuda:0");
    CHECK(all[0].uuid == c);
    CHECK(all[0].physical_index == 2);
    CHECK(all[0].runner_visible == c);
    CHECK(all[0].test_fake);
    CHECK(all[1].id == "cuda:1");
    CHECK(all[1].uuid == a);
    CHECK(all[1].physical_index == 0);
    CHECK(all[2].id == "cpu");
    CHECK_FALSE(all[2].test_fake);

    std::string visible;
    std::string runner_device;
    REQUIRE(kiln::map_device("cuda:0", visible, runner_device));
    CHECK(visible == c); // the runner sees exactly that device, whatever kiln's mask
    CHECK(runner_device == "cpu");
    REQUIRE(kiln::map_device("cuda:1", visible, runner_device));
    CHECK(visible == a);
    CHECK_FALSE(kiln::map_device("cuda:2", visible, runner_device));
    CHECK(kiln::gpu_target_for("cuda:0").index == -1); // no clocks to read on a fake

    auto chosen = kiln::select_devices({"auto"});
    REQUIRE(chosen.size() == 2);
    CHECK(chosen[1].uuid == a);
    CHECK(kiln::find_device("cuda:1")->uuid == a);
    CHECK_FALSE(kiln::find_device("cuda:2"));
  }
  {
    scoped_env mask{"CUDA_VISIBLE_DEVICES", nullptr};
    auto all = kiln::discover_devices();
    REQUIRE(all.size() == 4);
    CHECK(all[1].uuid == b);
    CHECK(all[1].physical_index == 1);
  }
  {
    scoped_env mask{"CUDA_VISIBLE_DEVICES", ""};
    CHECK(kiln::discover_devices().size() == 1);
    CHECK(kiln::select_devices({"auto"}).front().id == "cpu");
  }
  {
    scoped_env mask{"CUDA_VISIBLE_DEVICES", "GPU-0b0b"};
    auto all = kiln::discover_devices();
    REQUIRE(all.size() == 2);
    CHECK(all[0].uuid == b);
  }
}

TEST_CASE("the CPU's runners see no GPU; unknown devices are refused", "[devices]") {
  std::string visible = "junk";
  std::string runner_device;
  REQUIRE(kiln::map_device("cpu", visible, runner_device));
  CHECK(visible.empty());
  CHECK(runner_device == "cpu");
  CHECK_FALSE(kiln::map_device("gpu0", visible, runner_device));
  CHECK_FALSE(kiln::map_device("cuda:", visible, runner_device));
  if (!host_has_gpu())
    CHECK_FALSE(kiln::map_device("cuda:0", visible, runner_device));
}
