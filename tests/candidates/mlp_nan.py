# Expected verdict: incorrect (nan_output). The candidate computes NaN itself: the square root of
# a negative number in the last output column. Without kiln's NaN fill of freed memory it is
# still NaN, so the verdict says the NaN is computed, not read from memory nobody wrote.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        layers = []
        width = in_features
        for h in hidden_sizes:
            layers.append(nn.Linear(width, h))
            layers.append(nn.ReLU())
            width = h
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        y = self.net(x)
        y[:, -1] = torch.sqrt(-1.0 - y[:, -1].abs())
        return y
