# Exercises: a matrix-vector product whose 24 MB weight fits the L2's persisting share (the L2 access-policy exploit).
import torch
import torch.nn as nn

batch_size = 8
in_features = 4096
out_features = 1536


class Model(nn.Module):
    """x @ W.T for a small batch: every call reads the whole weight once."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
