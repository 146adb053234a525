#include "gpu/harness.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <unistd.h>

namespace kiln::embedded {
// Generated from gpu/harness/*.py by cmake/KilnEmbed.cmake.
extern const std::string_view harness_py;
extern const std::string_view harness_timing_py;
extern const std::string_view harness_build_py;
} // namespace kiln::embedded

namespace kiln {

namespace fs = std::filesystem;

const std::vector<harness_file>& harness_files() {
  static const std::vector<harness_file> files = {
      {"kiln_harness.py", embedded::harness_py},
      {"kiln_timing.py", embedded::harness_timing_py},
      {"kiln_build.py", embedded::harness_build_py},
  };
  return files;
}

std::string_view harness_source() {
  return harness_files().front().source;
}

namespace {

void install_file(const fs::path& path, std::string_view source) {
  {
    std::ifstream in{path, std::ios::binary};
    if (in) {
      std::string have{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
      if (have == source)
        return;
    }
  }
  // Write a private temporary and rename it over the target, so that a runner starting in
  // another process never reads a half-written harness.
  // pid and thread: engines of one process may install into one folder at once.
  auto tmp = path.string() + ".tmp." + std::to_string(::getpid()) + "."
             + std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
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
    throw std::runtime_error("cannot install the harness at " + path.string());
  }
}

} // namespace

std::string install_harness(const std::string& dir) {
  fs::create_directories(dir);
  for (const auto& f : harness_files())
    install_file(fs::path{dir} / f.name, f.source);
  return (fs::path{dir} / harness_files().front().name).string();
}

} // namespace kiln
