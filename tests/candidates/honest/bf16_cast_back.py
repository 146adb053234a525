# Honest idiom: the elementwise tail computed in bfloat16 (`.to(torch.bfloat16)`), cast back to
# the input's dtype before the residual add; the GEMM stays float32.
# For tests/tasks/cpu/8_GeluTail.py. Reduced precision: noted.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        dtype = x.dtype
        t = (self.linear(x) + self.bias).to(torch.bfloat16)
        t = torch.clamp(F.gelu(t) * self.scale_factor, self.clamp_min, self.clamp_max)
        return t.to(dtype) + x
