# Expected verdict: correct (for tests/tasks/cpu/8_GeluTail.py). The elementwise tail fused into
# one C++ function built with load_inline (C++ only, so it builds on a CPU-only machine): the
# real torch/extension.h path of the compile cache. Tests replace KILN_SALT to get a source never
# built before.
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

_ext = load_inline(name="kiln_gelu_tail", cpp_sources=[CPP], functions=["gelu_tail"])


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
