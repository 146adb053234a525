# Honest idiom: the task's nn.Sequential rebuilt the same way and reused: the hidden part run by
# slicing the Sequential, the last Linear applied through F.linear.
# For tests/tasks/cpu/1_MLP.py.
import torch
import torch.nn as nn
import torch.nn.functional as F


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
        self.hidden = self.net[:-1]

    def forward(self, x):
        last = self.net[-1]
        return F.linear(self.hidden(x), last.weight, last.bias)
