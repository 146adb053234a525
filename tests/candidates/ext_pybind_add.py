# Expected verdict: correct (for tests/tasks/cpu/3_Softmax.py). Builds a pybind11-only C++
# extension with torch.utils.cpp_extension.load from a file it writes at import: a cheap build
# for the compile cache's mechanics. Tests replace KILN_SALT to get a source never built before.
import os
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""
// KILN_SALT
#include <pybind11/pybind11.h>
static int add(int a, int b) { return a + b; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add); }
"""

_path = os.path.join(tempfile.mkdtemp(), "kiln_add.cpp")
with open(_path, "w") as f:
    f.write(SOURCE)
_ext = load(name="kiln_add", sources=[_path])
assert _ext.add(2, 3) == 5


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)
