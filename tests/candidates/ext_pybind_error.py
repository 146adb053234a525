# Expected verdict: compile_error. Its C++ source does not compile (an undeclared identifier);
# the verdict must carry the compiler's error line.
import os
import tempfile

import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""
#include <pybind11/pybind11.h>
static int add(int a, int b) { return a + kiln_undeclared_thing; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add); }
"""

_path = os.path.join(tempfile.mkdtemp(), "broken.cpp")
with open(_path, "w") as f:
    f.write(SOURCE)
_ext = load(name="kiln_broken", sources=[_path])


class ModelNew(nn.Module):
    def forward(self, x):
        return x
