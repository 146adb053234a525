# Expected verdict: runtime_error (out of memory) when CPU runners have an address-space limit
# ([evaluator] memory_limit_gb). Allocates and touches 1 GiB blocks until an allocation fails.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        hog = []
        for _ in range(64):
            hog.append(torch.ones(1 << 28))  # 1 GiB of float32, written
        return self.proj(x) + hog[0].sum()
