# Honest idiom: the three outputs gathered in a typing.NamedTuple (a tuple subclass) and returned
# as a plain tuple. For tests/tasks/cpu/6_MinMaxTuple.py.
from typing import NamedTuple

import torch
import torch.nn as nn


class Reduced(NamedTuple):
    y: torch.Tensor
    row_max: torch.Tensor
    col_min: torch.Tensor


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def reduce(self, x) -> Reduced:
        y = self.linear(x)
        return Reduced(y=y, row_max=y.max(dim=1).values, col_min=y.min(dim=0).values)

    def forward(self, x):
        return tuple(self.reduce(x))
