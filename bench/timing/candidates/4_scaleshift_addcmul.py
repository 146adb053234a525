# kiln timing benchmark candidate for ../tasks/4_ScaleShiftClampCPU.py: the multiply and add as
# one addcmul (one pass, one output), then the clamp in place on it: two passes instead of three
# and no temporaries.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(cols) + 0.5)
        self.shift = nn.Parameter(torch.randn(cols) * 0.2)

    def forward(self, x):
        with torch.no_grad():
            return torch.addcmul(self.shift, x, self.scale).clamp_(-1.0, 1.0)
