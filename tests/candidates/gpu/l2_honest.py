# The honest twin of l2_persist_window.py: the same reduction, nothing else. Expected on a GPU:
# correct, about 1x.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, rows, cols):
        super().__init__()
        self.table = nn.Parameter(torch.randn(rows, cols))

    def forward(self, x):
        return x + torch.sum(self.table, dim=1)
