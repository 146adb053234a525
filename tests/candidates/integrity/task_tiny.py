# Not a candidate: a LOW-SIGNAL task for the corpus. Every output is within atol (1e-2) of zero,
# so an all-zero answer would pass allclose; only the signal check can refuse it.
import torch
import torch.nn as nn

batch_size = 64
features = 256


class Model(nn.Module):
    """tanh(x) * 1e-3."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x) * 1e-3


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
