# kiln bench candidate for ../tasks/4_MLPBlock.py: fc1 as a bare GEMM, then a Triton bias + GELU
# epilogue over 2-D tiles (BLOCK_M rows by BLOCK_N columns, masks on both edges, the bias loaded
# once per tile), then fc2 through F.linear with its bias. BLOCK 8 x 512, 4 warps.
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _bias_gelu_tile_kernel(h_ptr, b_ptr, y_ptr, n_rows, n_cols, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < n_rows
    col_mask = cols < n_cols
    mask = row_mask[:, None] & col_mask[None, :]
    offs = rows.to(tl.int64)[:, None] * n_cols + cols[None, :]
    h = tl.load(h_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=col_mask, other=0.0)
    v = h + b[None, :]
    y = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=mask)


def bias_gelu(h, bias):
    h = h.contiguous()
    bias = bias.contiguous()
    y = torch.empty_like(h)
    n_rows, n_cols = h.shape
    if h.numel() == 0:
        return y
    BLOCK_M, BLOCK_N = 8, 512
    grid = (triton.cdiv(n_rows, BLOCK_M), triton.cdiv(n_cols, BLOCK_N))
    _bias_gelu_tile_kernel[grid](h, bias, y, n_rows, n_cols, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                 num_warps=4)
    return y


class ModelNew(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        with torch.no_grad():
            x2 = x.reshape(-1, x.shape[-1])
            h = bias_gelu(torch.mm(x2, self.fc1.weight.t()), self.fc1.bias)
            y = F.linear(h, self.fc2.weight, self.fc2.bias)
            return y.view(*x.shape[:-1], y.shape[-1])
