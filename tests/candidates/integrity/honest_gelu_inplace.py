# Honest: the two biases folded into one addmm, then GELU, scale and clamp in place on the
# intermediate, residual last. Expected: correct.
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
        y = torch.addmm(self.linear.bias + self.bias, x, self.linear.weight.t())
        y = F.gelu(y)
        y.mul_(self.scale_factor).clamp_(self.clamp_min, self.clamp_max)
        return y.add_(x)
