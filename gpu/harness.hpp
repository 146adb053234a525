#pragma once

#include <string>
#include <string_view>

namespace kiln {

/// The Python harness (gpu/harness/kiln_harness.py) compiled into the binary.
std::string_view harness_source();

/// Writes the harness into `dir` (created if needed) unless an identical copy is there;
/// returns the file's path.
std::string install_harness(const std::string& dir);

} // namespace kiln
