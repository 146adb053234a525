#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// One file of the Python harness (gpu/harness/*.py), compiled into the binary.
struct harness_file {
  std::string_view name; ///< e.g. `kiln_harness.py`
  std::string_view source;
};

/// Every file of the harness; the first is the entry point, `kiln_harness.py`.
const std::vector<harness_file>& harness_files();

/// The entry point's source.
std::string_view harness_source();

/// Writes the harness into `dir` (created if needed), each file unless an identical copy is
/// there; returns the entry point's path.
std::string install_harness(const std::string& dir);

} // namespace kiln
