# Honest idiom: a @torch.jit.script function with typed parameters, an Optional[torch.Tensor]
# argument defaulting to None, and a float default. For tests/tasks/cpu/8_GeluTail.py.
from typing import Optional

import torch
import torch.nn as nn


@torch.jit.script
def fused_tail(y: torch.Tensor, bias: torch.Tensor, scale: float, lo: float, hi: float,
               residual: Optional[torch.Tensor] = None, alpha: float = 1.0) -> torch.Tensor:
    v = y + bias
    g = 0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476))
    g = torch.clamp(g * scale, lo, hi)
    if residual is not None:
        g = g + alpha * residual
    return g


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = float(scale_factor)
        self.clamp_min = float(clamp_min)
        self.clamp_max = float(clamp_max)

    def forward(self, x):
        return fused_tail(self.linear(x), self.bias, self.scale_factor, self.clamp_min,
                          self.clamp_max, residual=x)
