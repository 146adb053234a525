# Honest idiom: a Triton kernel with annotated constexpr parameters that have defaults
# (`BLOCK: tl.constexpr = 1024`), module-level constexpr constants written
# `SQRT1_2: tl.constexpr = tl.constexpr(...)`, and a torch fallback without Triton.
# For tests/tasks/cpu/8_GeluTail.py.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None
    tl = None

if triton is not None:
    SQRT1_2: tl.constexpr = tl.constexpr(1.0 / math.sqrt(2.0))

    @triton.jit
    def _tail_kernel(y_ptr, b_ptr, x_ptr, out_ptr, n, cols, scale, lo, hi,
                     BLOCK: tl.constexpr = 1024):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        v = tl.load(y_ptr + offs, mask=mask) + tl.load(b_ptr + offs % cols, mask=mask)
        g = 0.5 * v * (1.0 + tl.math.erf(v * SQRT1_2)) * scale
        g = tl.minimum(tl.maximum(g, lo), hi)
        tl.store(out_ptr + offs, g + tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = self.linear(x)
        if triton is None or not y.is_cuda:
            g = F.gelu(y + self.bias) * self.scale_factor
            return g.clamp(self.clamp_min, self.clamp_max) + x
        out = torch.empty_like(y)
        n = y.numel()
        _tail_kernel[(triton.cdiv(n, 1024),)](y, self.bias, x.contiguous(), out, n, y.shape[-1],
                                             self.scale_factor, self.clamp_min, self.clamp_max)
        return out
