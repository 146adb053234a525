# Honest idiom: @triton.heuristics choosing the block from the row length, a module-level
# constant written `LOG2E: tl.constexpr = tl.constexpr(...)`, exp2 for the exponentials.
# For bench/tasks/2_RowSoftmax.py (CUDA and Triton only).
import torch
import torch.nn as nn
import triton
import triton.language as tl

LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n_cols"])})
@triton.jit
def _softmax_temperature(x_ptr, y_ptr, n_cols, inv_t, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")) * inv_t
    m = tl.max(x, axis=0)
    e = tl.exp2((x - m) * LOG2E)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        _softmax_temperature[(rows,)](x, y, cols, 1.0 / self.temperature, num_warps=8)
        return y
