# Honest idiom: a custom operator registered with torch.library (a namespace of its own,
# implementations for the CPU and CUDA dispatch keys) and called through torch.ops.
# For tests/tasks/cpu/3_Softmax.py.
import torch
import torch.nn as nn

_lib = torch.library.Library("honest_softmax", "DEF")
_lib.define("rows(Tensor x) -> Tensor")


def _rows(x):
    m = x.amax(dim=-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(dim=-1, keepdim=True)


_lib.impl("rows", _rows, "CPU")
_lib.impl("rows", _rows, "CUDA")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.ops.honest_softmax.rows(x)
