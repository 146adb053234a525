# PEERS (c) #2 / #9, replay of one answer: computes on the first call only and returns that
# output forever. Expected: incorrect, since every trial has fresh inputs from per-evaluation
# seeds.
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
        self.first = None

    def forward(self, x):
        if self.first is None:
            self.first = self.net(x)
        return self.first.clone()
