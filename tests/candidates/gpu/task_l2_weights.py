# Exercises: the L2 access-policy exploit. Each call reads a 30 MiB table once (within the L2's
# persisting share: 31.25 MiB on the H100) and little else: a memory-bound reduction, so a table
# that stays in L2 across the flush makes a cold call faster.
import torch
import torch.nn as nn

batch_size = 8
rows = 1920
cols = 4096


class Model(nn.Module):
    """The table's row sums added to a small batch."""

    def __init__(self, rows, cols):
        super().__init__()
        self.table = nn.Parameter(torch.randn(rows, cols))

    def forward(self, x):
        return x + self.table.sum(dim=1)


def get_inputs():
    return [torch.randn(batch_size, rows)]


def get_init_inputs():
    return [rows, cols]
