# Honest and stateful: the moving average with lerp_ (the task's state, other ops). The
# post-timing re-check cannot apply to a stateful task. Expected: correct, with a note that the
# re-check was skipped.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, momentum):
        super().__init__()
        self.momentum = momentum
        self.gain = nn.Parameter(torch.rand(features) + 0.5)
        self.register_buffer("avg", torch.zeros(features))

    def forward(self, x):
        self.avg.lerp_(x.mean(dim=0), self.momentum)
        return (x - self.avg) * self.gain
