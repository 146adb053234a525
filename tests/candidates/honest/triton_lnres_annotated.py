# Honest idiom: the shape of the published solution that kiln used to reject: a Triton kernel
# with `INV_N: tl.constexpr = 1.0 / N` inside it, and a launcher whose parameters are annotated
# with defaults (`residual: torch.Tensor = None`). For bench/tasks/3_LayerNormResidual.py
# (CUDA and Triton only).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_layer_norm(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, eps, N: tl.constexpr, BLOCK: tl.constexpr,
                    HAS_RESIDUAL: tl.constexpr):
    INV_N: tl.constexpr = 1.0 / N
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    h = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    if HAS_RESIDUAL:
        h += tl.load(r_ptr + row * N + cols, mask=mask, other=0.0)
    mean = tl.sum(h, axis=0) * INV_N
    centred = tl.where(mask, h - mean, 0.0)
    var = tl.sum(centred * centred, axis=0) * INV_N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, centred * rstd * w + b, mask=mask)


def add_layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                   residual: torch.Tensor = None, eps: float = 1e-5) -> torch.Tensor:
    x = x.contiguous()
    n = x.shape[-1]
    y = torch.empty_like(x)
    r = residual.contiguous() if residual is not None else x
    _add_layer_norm[(x.numel() // n,)](x, r, weight, bias, y, eps, N=n,
                                        BLOCK=triton.next_power_of_2(n),
                                        HAS_RESIDUAL=residual is not None, num_warps=8)
    return y


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(hidden))
        self.bias = nn.Parameter(0.2 * torch.randn(hidden))
        self.hidden = hidden
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor = None) -> torch.Tensor:
        return add_layer_norm(x, self.weight, self.bias, residual=residual, eps=self.eps)
