# Honest idiom: parameter annotations with defaults (`residual: torch.Tensor = None`) and a
# return annotation on the helper that fuses the elementwise tail.
# For tests/tasks/cpu/8_GeluTail.py.
import torch
import torch.nn as nn
import torch.nn.functional as F


def gelu_tail(y: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor = None,
              scale: float = 1.0, lo: float = -1.0, hi: float = 1.0) -> torch.Tensor:
    out = F.gelu(y + bias).mul_(scale).clamp_(lo, hi)
    if residual is not None:
        out += residual
    return out


class ModelNew(nn.Module):
    def __init__(self, features: int, scale_factor: float, clamp_min: float, clamp_max: float):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_tail(self.linear(x), self.bias, residual=x, scale=self.scale_factor,
                         lo=self.clamp_min, hi=self.clamp_max)
