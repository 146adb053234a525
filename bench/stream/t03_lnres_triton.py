# kiln bench candidate for ../tasks/3_LayerNormResidual.py: one Triton program per row computes
# x + residual, its mean and variance, and the affine output in one pass over memory.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_layer_norm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    base = row * n_cols
    x = tl.load(x_ptr + base + offs, mask=mask, other=0.0)
    r = tl.load(r_ptr + base + offs, mask=mask, other=0.0)
    v = x + r
    mean = tl.sum(v, axis=0) / n_cols
    d = tl.where(mask, v - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + base + offs, d * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(hidden))
        self.bias = nn.Parameter(0.2 * torch.randn(hidden))
        self.hidden = hidden
        self.eps = eps

    def forward(self, x, residual):
        with torch.no_grad():
            x = x.contiguous()
            residual = residual.contiguous()
            rows = x.numel() // self.hidden
            y = torch.empty_like(x)
            BLOCK = triton.next_power_of_2(self.hidden)
            _add_layer_norm_kernel[(rows,)](x, residual, self.weight, self.bias, y, self.hidden,
                                            float(self.eps), BLOCK=BLOCK, num_warps=8)
            return y
