#include <cstdio>
#include <iostream>
#include <sstream>

#include "gpu/devices.hpp"
#include "gpu/json_text.hpp"
#include "tools/cli.hpp"

namespace kiln::cli {

int devices(bool json) {
  auto found = discover_devices();
  if (json) {
    std::ostringstream out;
    out << "[";
    for (size_t i = 0; i < found.size(); ++i) {
      auto& d = found[i];
      out << (i ? ",\n " : "") << "{\"id\": " << json_quote(d.id)
          << ", \"name\": " << json_quote(d.name) << ", \"memory_bytes\": " << d.memory_bytes
          << ", \"multiprocessors\": " << d.multiprocessors
          << ", \"capability\": " << (d.capability.empty() ? "null" : json_quote(d.capability))
          << "}";
    }
    out << "]\n";
    std::cout << out.str();
    return 0;
  }
  std::printf("%-8s %-40s %10s %6s %s\n", "device", "name", "memory", "units", "capability");
  for (auto& d : found) {
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f GiB",
                  static_cast<double>(d.memory_bytes) / (1024.0 * 1024.0 * 1024.0));
    std::printf("%-8s %-40s %10s %6d %s\n", d.id.c_str(), d.name.c_str(), mem, d.multiprocessors,
                d.capability.empty() ? "-" : d.capability.c_str());
  }
  return 0;
}

} // namespace kiln::cli
