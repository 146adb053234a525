# Honest idiom: a torch.autograd.Function subclass with static forward/backward (the backward is
# never used by the evaluation), called through .apply. For tests/tasks/cpu/8_GeluTail.py.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GeluScaleClamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, scale, lo, hi):
        g = F.gelu(y)
        out = g * scale
        ctx.save_for_backward(y, out)
        ctx.scale, ctx.lo, ctx.hi = scale, lo, hi
        return out.clamp(lo, hi)

    @staticmethod
    def backward(ctx, grad):
        y, out = ctx.saved_tensors
        cdf = 0.5 * (1.0 + torch.erf(y / math.sqrt(2.0)))
        pdf = torch.exp(-0.5 * y * y) / math.sqrt(2.0 * math.pi)
        inside = (out >= ctx.lo) & (out <= ctx.hi)
        return grad * inside * ctx.scale * (cdf + y * pdf), None, None, None


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = self.linear(x) + self.bias
        return GeluScaleClamp.apply(y, self.scale_factor, self.clamp_min, self.clamp_max) + x
