#pragma once

#include <string>

namespace kiln {

/// The interpreter that runs the harness: `configured` when not empty (must import torch),
/// otherwise the first of `python3` on PATH and `/usr/bin/python3` that imports torch.
/// Throws std::runtime_error naming what was tried when none works.
std::string find_python(const std::string& configured);

} // namespace kiln
