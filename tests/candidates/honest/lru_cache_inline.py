# Honest idiom: the extension built lazily on the first call and kept by functools.lru_cache,
# so importing the file compiles nothing. For tests/tasks/cpu/8_GeluTail.py.
import functools

import torch
import torch.nn as nn

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


@functools.lru_cache(maxsize=None)
def _extension():
    from torch.utils.cpp_extension import load_inline

    return load_inline(name="honest_gelu_tail", cpp_sources=[_CPP], functions=["gelu_tail"],
                       extra_cflags=["-O2"], with_cuda=False)


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        ext = _extension()
        return ext.gelu_tail(self.linear(x), self.bias, x, self.scale_factor, self.clamp_min,
                             self.clamp_max)
