#include "gpu/harness.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>

#include <unistd.h>

namespace kiln::embedded {
// Generated from gpu/harness/kiln_harness.py by cmake/KilnEmbed.cmake.
extern const std::string_view harness_py;
} // namespace kiln::embedded

namespace kiln {

namespace fs = std::filesystem;

std::string_view harness_source() {
  return embedded::harness_py;
}

std::string install_harness(const std::string& dir) {
  fs::create_directories(dir);
  auto path = (fs::path{dir} / "kiln_harness.py").string();
  auto source = harness_source();
  {
    std::ifstream in{path, std::ios::binary};
    if (in) {
      std::string have{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
      if (have == source)
        return path;
    }
  }
  // Write a private temporary and rename it over the target, so that a runner starting in
  // another process never reads a half-written harness.
  auto tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out{tmp, std::ios::binary | std::ios::trunc};
    out.write(source.data(), static_cast<std::streamsize>(source.size()));
    out.close();
    if (!out)
      throw std::runtime_error("cannot write the harness to " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot install the harness at " + path);
  }
  return path;
}

} // namespace kiln
