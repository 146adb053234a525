# Honest idiom: keyword arguments (`dtype=torch.float32`, `memory_format=...`), dict and set
# literals keyed by dtypes, subscript assignment and `del` with a dtype key, slices, and one-line
# `for dt in torch.float16, torch.bfloat16: ...` loops. For tests/tasks/cpu/1_MLP.py.
import torch
import torch.nn as nn
import torch.nn.functional as F

_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
_LOW = {torch.float16, torch.bfloat16}
_TOLERANT = []
for dt in torch.float16, torch.bfloat16: _TOLERANT.append(dt)
for dt in torch.float32, torch.float64: _WIDEST = dt
_NAMES[torch.float64] = "fp64"
del _NAMES[torch.float64]


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        widths = [in_features] + list(hidden_sizes) + [out_features]
        self.fcs = nn.ModuleList(
            [nn.Linear(widths[i], widths[i + 1]) for i in range(len(widths) - 1)])
        self.compute_dtype = torch.float32
        assert _NAMES[self.compute_dtype] == "fp32" and self.compute_dtype not in _LOW

    def forward(self, x):
        h = x.to(dtype=self.compute_dtype, memory_format=torch.contiguous_format)
        for fc in self.fcs[:-1]:
            h = torch.addmm(fc.bias, h, fc.weight.t()).clamp_(min=0.0)
        last = self.fcs[-1]
        out = torch.empty(h.shape[0], last.out_features, dtype=torch.float32, device=h.device)
        out[:, :] = F.linear(h, last.weight[:, :], last.bias[...])
        return out
