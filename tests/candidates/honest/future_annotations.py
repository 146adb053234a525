# Honest idiom: `from __future__ import annotations` with annotations that stay strings, and a
# quoted forward reference. For tests/tasks/cpu/3_Softmax.py.
from __future__ import annotations

import torch
import torch.nn as nn


class RowSoftmax:
    dim: int = -1

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        shifted = x - x.amax(dim=self.dim, keepdim=True)
        e = shifted.exp_()
        return e.div_(e.sum(dim=self.dim, keepdim=True))

    def with_dim(self, dim: int) -> "RowSoftmax":
        other = RowSoftmax()
        other.dim = dim
        return other


class ModelNew(nn.Module):
    op: RowSoftmax

    def __init__(self) -> None:
        super().__init__()
        self.op = RowSoftmax().with_dim(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)
