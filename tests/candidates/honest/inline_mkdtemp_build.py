# Honest idiom: a module-level load_inline with its own build folder from tempfile.mkdtemp(),
# extra_cflags, verbose=True and an explicit with_cuda=False (C++ only).
# For tests/tasks/cpu/8_GeluTail.py. Same extension as inline_tmp_build_dir.py,
# inline_extensions_dir.py and lru_cache_inline.py: one build for all four.
import tempfile

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>

// The elementwise tail in one call: clamp(gelu(y + bias) * scale, lo, hi) + x.
torch::Tensor gelu_tail(torch::Tensor y, torch::Tensor bias, torch::Tensor x, double scale,
                        double lo, double hi) {
  auto g = at::gelu(y + bias);
  g.mul_(scale).clamp_(lo, hi);
  return g.add_(x);
}
"""

_ext = load_inline(
    name="honest_gelu_tail",
    cpp_sources=[_CPP],
    functions=["gelu_tail"],
    extra_cflags=["-O2"],
    with_cuda=False,
    build_directory=tempfile.mkdtemp(prefix="honest_gelu_"),
    verbose=True,
)


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
