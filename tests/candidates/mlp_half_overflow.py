# Expected verdict: incorrect (inf_output). A float16 intermediate overflows: scaled past 65504
# before the cast back, every value becomes Inf.
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
        return (y.half() * 70000.0).float() / 70000.0
