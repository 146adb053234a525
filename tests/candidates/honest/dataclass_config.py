# Honest idiom: a dataclass holding the configuration, with annotated fields and defaults
# (`dtype: torch.dtype = torch.float32`, `field(default_factory=...)`).
# For tests/tasks/cpu/1_MLP.py (same parameters in the same order as the task's Model).
from dataclasses import dataclass, field
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class MLPConfig:
    in_features: int
    out_features: int
    hidden: List[int] = field(default_factory=list)
    dtype: torch.dtype = torch.float32
    activation: str = "relu"


@dataclass(frozen=True)
class Plan:
    layers: int
    fuse_relu: bool = True


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        self.cfg = MLPConfig(in_features, out_features, hidden=list(hidden_sizes))
        self.plan = Plan(layers=len(hidden_sizes) + 1)
        widths = [self.cfg.in_features] + self.cfg.hidden + [self.cfg.out_features]
        self.layers = nn.ModuleList(
            nn.Linear(a, b, dtype=self.cfg.dtype) for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < self.plan.layers and self.plan.fuse_relu:
                x = F.relu(x, inplace=True)
        return x
