# Honest idiom: annotated assignments at module, class and instance level
# (`EPS: float = 1e-5`, `_DTYPE: torch.dtype = torch.float32`, `weight: torch.Tensor`,
# `self.eps: float = eps`). For tests/tasks/cpu/4_LayerNorm.py.
from typing import Tuple

import torch
import torch.nn as nn

EPS: float = 1e-5
_DTYPE: torch.dtype = torch.float32
_REDUCE_DIMS: Tuple[int, int] = (-2, -1)


class ModelNew(nn.Module):
    weight: torch.Tensor
    bias: torch.Tensor
    eps: float = EPS

    def __init__(self, normalized_shape: Tuple[int, int]):
        super().__init__()
        self.shape: Tuple[int, int] = tuple(normalized_shape)
        self.weight = nn.Parameter(torch.ones(self.shape, dtype=_DTYPE))
        self.bias = nn.Parameter(torch.zeros(self.shape, dtype=_DTYPE))
        self.eps: float = EPS

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean: torch.Tensor = x.mean(dim=_REDUCE_DIMS, keepdim=True)
        centred: torch.Tensor = x - mean
        var: torch.Tensor = (centred * centred).mean(dim=_REDUCE_DIMS, keepdim=True)
        return centred * torch.rsqrt(var + self.eps) * self.weight + self.bias
