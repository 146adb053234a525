# kiln bench task. Transformer-style MLP block: Linear(1024 -> 4096) -> GELU -> Linear(4096 ->
# 1024) on 1024 tokens. Two fp32 GEMMs plus a bias/GELU epilogue that can be fused.
# Expected on an H200, float32 (no TF32): ~0.3-0.5 ms; the "middle" kernel of the
# repeatability benchmark.
import torch
import torch.nn as nn
import torch.nn.functional as F

tokens = 1024
d_model = 1024
d_hidden = 4096
input_scale = 2.0  # keeps the block's output well above the 1e-2 tolerance


class Model(nn.Module):
    """fc2(gelu(fc1(x)))."""

    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def get_inputs():
    return [torch.randn(tokens, d_model) * input_scale]


def get_init_inputs():
    return [d_model, d_hidden]
