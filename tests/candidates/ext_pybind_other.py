# Expected verdict: correct (for tests/tasks/cpu/3_Softmax.py). The same C++ source as
# ext_pybind_add.py, written to another file, with different Python code: its build must come
# from the cache that ext_pybind_add.py filled.
import os
import tempfile

import torch
import torch.nn as nn
import torch.utils.cpp_extension

SOURCE = r"""
// KILN_SALT
#include <pybind11/pybind11.h>
static int add(int a, int b) { return a + b; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add); }
"""

_dir = tempfile.mkdtemp()
with open(os.path.join(_dir, "other_name.cpp"), "w") as f:
    f.write(SOURCE)
adder = torch.utils.cpp_extension.load("kiln_add", [os.path.join(_dir, "other_name.cpp")])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.offset = adder.add(0, 0)

    def forward(self, x):
        return torch.softmax(x + self.offset, dim=-1)
