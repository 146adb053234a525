# Expected verdict: timeout (evaluated with a short timeout). Loops forever in forward.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()

    def forward(self, x):
        n = 0
        while True:
            n += 1
