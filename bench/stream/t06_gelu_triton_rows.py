# kiln bench candidate for ../tasks/1_BiasGeluScale.py: Triton bias + GELU + scale on a 2-D grid
# (one row by BLOCK_N columns per program), so the bias is indexed by column directly instead of
# by a flat index modulo `cols` as in t01. BLOCK_N 2048, 8 warps.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_gelu_scale_rows_kernel(x_ptr, b_ptr, y_ptr, n_cols, scale, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    offs = row * n_cols + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    v = x + b
    y = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476)) * scale
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, cols, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)
        self.scale = float(scale)

    def forward(self, x):
        with torch.no_grad():
            x = x.contiguous()
            bias = self.bias.contiguous()
            cols = bias.numel()
            y = torch.empty_like(x)
            rows = x.numel() // cols
            if rows == 0:
                return y
            BLOCK_N = 2048
            grid = (rows, triton.cdiv(cols, BLOCK_N))
            _bias_gelu_scale_rows_kernel[grid](x, bias, y, cols, self.scale, BLOCK_N=BLOCK_N,
                                               num_warps=8)
            return y
