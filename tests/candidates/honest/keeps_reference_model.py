# Honest idiom: the task's original `class Model` kept in the file above the rewrite; kiln takes
# ModelNew when both are there. For tests/tasks/cpu/3_Softmax.py.
import torch
import torch.nn as nn


class Model(nn.Module):
    """The original: softmax(x, dim=-1)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


class ModelNew(nn.Module):
    """Same result with log-sum-exp: exp(x - logsumexp(x))."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))
