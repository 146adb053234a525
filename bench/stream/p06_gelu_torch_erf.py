# kiln bench candidate for ../tasks/1_BiasGeluScale.py: plain PyTorch with GELU written out through
# erf, gelu(v) * s = v * (1 + erf(v / sqrt(2))) * (s / 2), finished in place on the erf output
# (the factor 0.5 and the scale folded into one multiplication).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)
        self.half_scale = 0.5 * float(scale)

    def forward(self, x):
        with torch.no_grad():
            v = x + self.bias
            t = torch.erf(v * 0.7071067811865476)
            return t.add_(1.0).mul_(v).mul_(self.half_scale)
