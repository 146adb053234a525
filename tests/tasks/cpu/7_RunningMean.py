# Exercises: a STATEFUL module (buffer updated in place every call): the n-th output depends on calls 1..n-1.
import torch
import torch.nn as nn

batch_size = 1024
features = 4096
momentum = 0.25


class Model(nn.Module):
    """Keeps an exponential moving average of the per-feature batch mean in a buffer.

    Every forward (also in eval mode, also under no_grad) first updates
        avg <- (1 - momentum) * avg + momentum * x.mean(0)
    in place and then returns (x - avg) * gain. The buffer starts at zero, so repeated calls with
    the same input give different outputs. Deterministic given the sequence of inputs.
    """

    def __init__(self, features, momentum):
        super().__init__()
        self.momentum = momentum
        self.gain = nn.Parameter(torch.rand(features) + 0.5)
        self.register_buffer("avg", torch.zeros(features))

    def forward(self, x):
        self.avg.mul_(1.0 - self.momentum).add_(x.mean(dim=0), alpha=self.momentum)
        return (x - self.avg) * self.gain


def get_inputs():
    # Uniform [0, 2): per-feature mean about 1, so the moving average moves visibly between calls.
    return [torch.rand(batch_size, features) * 2.0]


def get_init_inputs():
    return [features, momentum]
