# PEERS (c) #1, a cheap stand-in for a low-signal output: against task_tiny.py (every output
# within tolerance of zero) returns a scaled clamp of the input, which varies, is not constant,
# and passes allclose, but is not the function. Expected: rejected by the signal check.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.clamp(-1.0, 1.0) * 1e-4
