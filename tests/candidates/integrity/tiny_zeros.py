# PEERS (c) #1, constant output: against task_tiny.py (all outputs within tolerance of zero)
# returns zeros, which allclose alone would accept. Expected: rejected by the signal check.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)
