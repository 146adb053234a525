# kiln bench task. SwiGLU feed-forward: down(silu(gate(x)) * up(x)), no biases, 2048 tokens,
# d_model 2048, d_ff 5632. Three fp32 GEMMs (~140 GFLOP) dominate. Expected on an H200,
# float32 (no TF32): ~2-4 ms per call; the ">= 1 ms" kernel of the repeatability benchmark.
import torch
import torch.nn as nn
import torch.nn.functional as F

tokens = 2048
d_model = 2048
d_ff = 5632
input_scale = 2.0  # keeps the output well above the 1e-2 tolerance


class Model(nn.Module):
    """down(silu(gate(x)) * up(x))."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def get_inputs():
    return [torch.randn(tokens, d_model) * input_scale]


def get_init_inputs():
    return [d_model, d_ff]
