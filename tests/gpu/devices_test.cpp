#include <catch2/catch.hpp>

#include <unistd.h>

#include <stdexcept>

#include "gpu/devices.hpp"

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
