# Expected verdict: incorrect or rejected. Skips the work and returns zeros of the right shape
# and dtype; the output comparison's signal check must never let this pass.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        self.out_features = out_features

    def forward(self, x):
        return torch.zeros(x.shape[0], self.out_features, dtype=x.dtype, device=x.device)
