# Honest idiom: register_buffer for the running state (persistent) and for a constant
# (persistent=False), updated in place under torch.no_grad. For tests/tasks/cpu/7_RunningMean.py
# (stateful: the re-check after timing is skipped, with a note).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, momentum):
        super().__init__()
        self.gain = nn.Parameter(torch.rand(features) + 0.5)
        self.register_buffer("avg", torch.zeros(features))
        self.register_buffer("keep", torch.tensor(1.0 - momentum), persistent=False)
        self.momentum = momentum

    @torch.no_grad()
    def forward(self, x):
        self.avg.mul_(self.keep).add_(x.mean(dim=0), alpha=self.momentum)
        return (x - self.avg).mul_(self.gain)
