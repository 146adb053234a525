# Honest idiom: lambdas with default arguments at module level
# (`lambda t, dtype=torch.float32: ...`, `lambda lo=-1.0, hi=1.0: ...`) and one-line functions
# with return annotations. For tests/tasks/cpu/8_GeluTail.py.
import torch
import torch.nn as nn
import torch.nn.functional as F

as_compute = lambda t, dtype=torch.float32: t if t.dtype == dtype else t.to(dtype)
clamp_between = lambda t, lo=-1.0, hi=1.0: torch.clamp(t, lo, hi)
pick = lambda a=torch.float32, b=torch.float64: a


def gelu(t: torch.Tensor) -> torch.Tensor: return F.gelu(t)
def scaled(t: torch.Tensor, s: float = 1.0) -> torch.Tensor: return t * s


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = as_compute(self.linear(x), dtype=pick())
        y = scaled(gelu(y + self.bias), self.scale_factor)
        return clamp_between(y, lo=self.clamp_min, hi=self.clamp_max) + x
