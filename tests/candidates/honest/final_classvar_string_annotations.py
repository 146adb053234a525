# Honest idiom: `typing.Final` module constants, a `ClassVar` dict of dtypes, string (forward)
# annotations with a `torch.Tensor | None = None` default, an annotated local. For
# tests/tasks/cpu/1_MLP.py.
from typing import ClassVar, Final, Dict
import torch
import torch.nn as nn

EPS: Final[float] = 1e-5
class ModelNew(nn.Module):
    DTYPES: ClassVar[Dict[str, torch.dtype]] = {"f32": torch.float32}
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        layers = []
        width = in_features
        for h in hidden_sizes:
            layers.append(nn.Linear(width, h)); layers.append(nn.ReLU()); width = h
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)
    def forward(self, x: "torch.Tensor", bias: "torch.Tensor | None" = None) -> "torch.Tensor":
        y: torch.Tensor = self.net(x.to(self.DTYPES["f32"]))
        return y
