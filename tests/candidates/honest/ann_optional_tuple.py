# Honest idiom: typing annotations everywhere: `Optional[torch.Tensor] = None` parameters and a
# `Tuple[...]` return, as LLM-written solutions spell them. For tests/tasks/cpu/6_MinMaxTuple.py.
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


def project(x: torch.Tensor, weight: torch.Tensor,
            bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    return F.linear(x, weight, bias)


def row_max_col_min(y: torch.Tensor,
                    dims: Tuple[int, int] = (1, 0)) -> Tuple[torch.Tensor, torch.Tensor]:
    return torch.amax(y, dim=dims[0]), torch.amin(y, dim=dims[1])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor,
                scale: Optional[float] = None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = project(x, self.linear.weight, self.linear.bias)
        if scale is not None:
            y = y * scale
        row_max, col_min = row_max_col_min(y)
        return y, row_max, col_min
