# kiln bench task. Small, launch-sensitive row softmax with a temperature: softmax(x / T) over
# the last dim of a 32 MB tensor. Expected on an H200, float32: well under 50 us per call; it is
# the "small kernel" of the repeatability benchmark.
import torch
import torch.nn as nn

rows = 4096
cols = 2048
temperature = 0.25
input_scale = 2.0  # with T = 0.25 the rows are peaked (max ~0.7), so zeros cannot pass 1e-2


class Model(nn.Module):
    """softmax(x / temperature, dim=-1) for x of shape (rows, cols)."""

    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, x):
        return torch.softmax(x / self.temperature, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols) * input_scale]


def get_init_inputs():
    return [temperature]
