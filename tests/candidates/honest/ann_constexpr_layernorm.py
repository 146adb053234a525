# Honest idiom: a Triton layer norm whose kernel names its constants with annotated assignments
# (`INV_N: tl.constexpr = 1.0 / (D1 * D2)`), defined only when Triton imports; torch's own
# layer_norm on the CPU. For tests/tasks/cpu/4_LayerNorm.py.
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

if triton is not None:

    @triton.jit
    def _layer_norm_rows(x_ptr, w_ptr, b_ptr, y_ptr, eps, D1: tl.constexpr, D2: tl.constexpr,
                         BLOCK: tl.constexpr):
        INV_N: tl.constexpr = 1.0 / (D1 * D2)
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < D1 * D2
        x = tl.load(x_ptr + row * (D1 * D2) + offs, mask=mask, other=0.0)
        mean = tl.sum(x, axis=0) * INV_N
        centred = tl.where(mask, x - mean, 0.0)
        var = tl.sum(centred * centred, axis=0) * INV_N
        rstd = 1.0 / tl.sqrt(var + eps)
        w = tl.load(w_ptr + offs, mask=mask, other=1.0)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + row * (D1 * D2) + offs, centred * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1, d2 = self.ln.normalized_shape
        if triton is None or not x.is_cuda:
            return F.layer_norm(x, self.ln.normalized_shape, self.ln.weight, self.ln.bias,
                                self.ln.eps)
        xc = x.contiguous()
        y = torch.empty_like(xc)
        rows = xc.numel() // (d1 * d2)
        _layer_norm_rows[(rows,)](xc, self.ln.weight, self.ln.bias, y, self.ln.eps, D1=d1, D2=d2,
                                  BLOCK=triton.next_power_of_2(d1 * d2))
        return y
