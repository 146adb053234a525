# kiln bench candidate for ../tasks/3_LayerNormResidual.py: Triton add + layer norm that walks each
# row in chunks of BLOCK columns instead of holding it in registers (t03). Pass 1 accumulates
# per-lane sums of v = x + residual and of v * v; pass 2 recomputes v and writes the affine
# output. BLOCK 1024, 4 warps.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_layer_norm_chunked_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps,
                                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc_sq = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0)
        r = tl.load(r_ptr + base + offs, mask=mask, other=0.0)
        v = x + r
        acc += v
        acc_sq += v * v
    mean = tl.sum(acc, axis=0) / n_cols
    var = tl.maximum(tl.sum(acc_sq, axis=0) / n_cols - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0)
        r = tl.load(r_ptr + base + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + base + offs, (x + r - mean) * rstd * w + b, mask=mask)


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
            y = torch.empty_like(x)
            rows = x.numel() // self.hidden
            if rows == 0:
                return y
            _add_layer_norm_chunked_kernel[(rows,)](x, residual, self.weight, self.bias, y,
                                                    self.hidden, float(self.eps), BLOCK=1024,
                                                    num_warps=4)
            return y
