# Honest idiom: a submodule compiled with torch.jit.script in __init__, returning a
# Tuple[Tensor, Tensor, Tensor]. For tests/tasks/cpu/6_MinMaxTuple.py.
from typing import Tuple

import torch
import torch.nn as nn


class _LinearMaxMin(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = self.linear(x)
        return y, torch.amax(y, dim=1), torch.amin(y, dim=0)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.core = torch.jit.script(_LinearMaxMin(in_features, out_features))

    def forward(self, x):
        return self.core(x)
