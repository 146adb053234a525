# PEERS (c) #13, reading memory nobody wrote: the last output column is never computed and
# holds whatever the allocator hands out. Expected: incorrect (the harness fills freed memory
# with NaN before every candidate call, so the garbage is NaN, not a lucky match).
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
        out = torch.empty_like(y)
        out[:, :-1] = y[:, :-1]
        return out
