# Expected verdict: incorrect (tolerance), not borderline. A single value is far off (10x the
# allowed difference): a real bug, such as a missed term at a tile's edge, on every seed.
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
        y[-1, -1] += 10.0 * (0.01 + 0.01 * y[-1, -1].abs())
        return y
