# Honest idiom: constants from math and numpy (math.sqrt, math.pi, np.float32) in an exact-GELU
# rewrite; numpy imported as np. For tests/tasks/cpu/8_GeluTail.py.
import math

import numpy as np
import torch
import torch.nn as nn

INV_SQRT2 = 1.0 / math.sqrt(2.0)
HALF = float(np.float32(0.5))
TWO_PI = 2.0 * math.pi
assert abs(TWO_PI - 2.0 * np.pi) < 1e-12


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.limits = np.array([clamp_min, clamp_max], dtype=np.float64)

    def forward(self, x):
        v = self.linear(x) + self.bias
        g = HALF * v * (1.0 + torch.erf(v * INV_SQRT2))
        lo, hi = (float(t) for t in self.limits)
        return torch.clamp(g * self.scale_factor, lo, hi) + x
