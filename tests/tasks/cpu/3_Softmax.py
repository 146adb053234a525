# Exercises: a memory-bound row softmax over the last dim (single-pass / online-softmax rewrites).
import torch
import torch.nn as nn

batch_size = 8192
features = 512
logit_scale = 3.0  # spreads the logits so rows are peaked and outputs carry real signal


class Model(nn.Module):
    """softmax(x, dim=-1) for x of shape (batch, features)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, features) * logit_scale]


def get_init_inputs():
    return []
