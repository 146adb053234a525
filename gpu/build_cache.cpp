#include "gpu/build_cache.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include <unistd.h>

namespace kiln {

namespace fs = std::filesystem;

std::string resolve_cache_dir(const std::string& configured) {
  if (!configured.empty())
    return fs::absolute(configured).lexically_normal().string();
  // The XDG spec says a relative $XDG_CACHE_HOME is invalid and must be ignored.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/')
    return (fs::path{xdg} / "kiln").lexically_normal().string();
  if (const char* home = std::getenv("HOME"); home && home[0] == '/')
    return (fs::path{home} / ".cache" / "kiln").lexically_normal().string();
  throw std::runtime_error("cannot place the build cache: neither XDG_CACHE_HOME nor HOME is an "
                           "absolute path; set [evaluator] cache_dir");
}

void prepare_cache_dir(const std::string& dir) {
  if (dir.empty())
    throw std::runtime_error("build cache: empty path");
  for (const char* sub : {"ext", "pch/requests", "triton", "inductor", "locks", "tmp"}) {
    std::error_code ec;
    fs::create_directories(fs::path{dir} / sub, ec);
    if (ec)
      throw std::runtime_error("build cache: cannot create " + (fs::path{dir} / sub).string() + ": "
                               + ec.message());
  }
  // Runners publish by renaming from tmp/ into ext/; find an unwritable cache here, not as a
  // build failure in every candidate.
  auto probe = fs::path{dir} / "tmp" / ("probe." + std::to_string(::getpid()));
  {
    std::ofstream out{probe};
    if (!out)
      throw std::runtime_error("build cache: " + dir + " is not writable");
  }
  std::error_code ignored;
  fs::remove(probe, ignored);
}

size_t sweep_cache_tmp(const std::string& dir, std::chrono::seconds max_age) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  size_t removed = 0;
  for (fs::directory_iterator it{fs::path{dir} / "tmp", ec}, end; !ec && it != end;
       it.increment(ec)) {
    std::error_code e;
    auto when = it->last_write_time(e);
    if (e || now - when < max_age)
      continue;
    if (fs::remove_all(it->path(), e) > 0 && !e)
      ++removed;
  }
  return removed;
}

} // namespace kiln
