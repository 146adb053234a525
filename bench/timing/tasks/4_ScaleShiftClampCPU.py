# kiln timing benchmark task (bench/timing/README.md), CPU size. Memory-bound and short on the
# CPU: y = clamp(x * scale + shift, -1, 1) over 512 x 1024 float32 (2 MiB in, 2 MiB out), with
# a per-column scale and shift. Eager makes three passes and two temporaries; about a
# millisecond or less on a small machine.
import torch
import torch.nn as nn

rows = 512
cols = 1024


class Model(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(cols) + 0.5)
        self.shift = nn.Parameter(torch.randn(cols) * 0.2)

    def forward(self, x):
        return torch.clamp(x * self.scale + self.shift, -1.0, 1.0)


def get_inputs():
    return [torch.randn(rows, cols) * 0.6]


def get_init_inputs():
    return [cols]
