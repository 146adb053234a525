// The embedded harness and its installation; the protocol itself is exercised end to end by
// evaluate_test.cpp.

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <catch2/catch.hpp>

#include "gpu/harness.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

} // namespace

TEST_CASE("the binary carries the harness source unchanged") {
  auto source = kiln::harness_source();
  CHECK(source == slurp(KILN_SOURCE_DIR "/gpu/harness/kiln_harness.py"));
  CHECK(source.find("def _main(argv, gate_fd=None):") != std::string_view::npos);
  for (const auto& f : kiln::harness_files())
    CHECK(f.source == slurp(KILN_SOURCE_DIR "/gpu/harness/" + std::string{f.name}));
}

TEST_CASE("installing the harness writes it once and repairs a changed copy") {
  auto dir = std::string{KILN_TEST_TMP} + "/harness-install/nested";
  fs::remove_all(fs::path{dir}.parent_path());
  auto path = kiln::install_harness(dir);
  CHECK(path == dir + "/kiln_harness.py");
  CHECK(slurp(path) == kiln::harness_source());

  auto before = fs::last_write_time(path);
  CHECK(kiln::install_harness(dir) == path);
  CHECK(fs::last_write_time(path) == before); // identical copy: left alone

  std::ofstream{path, std::ios::trunc} << "print('tampered')\n";
  kiln::install_harness(dir);
  CHECK(slurp(path) == kiln::harness_source());
  size_t files = 0;
  for (auto& e : fs::directory_iterator{dir}) {
    CHECK(e.path().extension() == ".py"); // no temporary left behind
    ++files;
  }
  CHECK(files == kiln::harness_files().size());
}
