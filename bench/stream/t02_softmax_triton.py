# kiln bench candidate for ../tasks/2_RowSoftmax.py: one Triton program per row, the whole row
# in registers, temperature folded in.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_softmax_kernel(x_ptr, y_ptr, n_cols, inv_temp, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    base = row * n_cols
    x = tl.load(x_ptr + base + offs, mask=mask, other=-float("inf"))
    x = x * inv_temp
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    e = tl.where(mask, e, 0.0)
    s = tl.sum(e, axis=0)
    tl.store(y_ptr + base + offs, e / s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature

    def forward(self, x):
        with torch.no_grad():
            x = x.contiguous()
            cols = x.shape[-1]
            rows = x.numel() // cols
            y = torch.empty_like(x)
            BLOCK = triton.next_power_of_2(cols)
            _row_softmax_kernel[(rows,)](x, y, cols, 1.0 / self.temperature, BLOCK=BLOCK,
                                         num_warps=8)
            return y
