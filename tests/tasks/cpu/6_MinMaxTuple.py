# Exercises: a forward that returns a TUPLE of three tensors of different shapes (projection + reductions).
import torch
import torch.nn as nn

batch_size = 256
in_features = 512
out_features = 1024


class Model(nn.Module):
    """Returns (y, y.max over features, y.min over batch) with y = Linear(x)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = self.linear(x)                      # (batch, out_features)
        row_max = torch.amax(y, dim=1)          # (batch,)
        col_min = torch.amin(y, dim=0)          # (out_features,)
        return y, row_max, col_min


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
