# Expected verdict: correct (for tests/tasks/cpu/8_GeluTail.py) where the sandbox gives runners a
# /tmp of their own. ext_gelu_inline.py's extension as many candidates write it: built with
# load_inline into build_directory="/tmp/torch_extensions", which the candidate makes itself
# (Landlock refused that folder before runners had a /tmp of their own). The same sources,
# name and flags as ext_gelu_inline.py: kiln's cache ignores build_directory, so both share one
# build. Tests replace KILN_SALT as they do there.
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
// KILN_SALT
torch::Tensor gelu_tail(torch::Tensor y, torch::Tensor bias, torch::Tensor x, double scale,
                        double lo, double hi) {
  return at::clamp(at::gelu(y + bias) * scale, lo, hi) + x;
}
"""

os.makedirs("/tmp/torch_extensions", exist_ok=True)
_ext = load_inline(name="kiln_gelu_tail", cpp_sources=[CPP], functions=["gelu_tail"],
                   build_directory="/tmp/torch_extensions")


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        return _ext.gelu_tail(self.linear(x), self.bias, x, self.scale_factor, self.clamp_min,
                              self.clamp_max)
