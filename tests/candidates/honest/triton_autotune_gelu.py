# Honest idiom: @triton.autotune over the block size, keyed on the element count, with a constant
# named inside the kernel by an annotated assignment (`INV_SQRT2: tl.constexpr = ...`).
# For bench/tasks/1_BiasGeluScale.py (CUDA and Triton only).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
        triton.Config({"BLOCK": 4096}, num_warps=8),
    ],
    key=["n_elements"],
)
@triton.jit
def _bias_gelu_scale(x_ptr, b_ptr, y_ptr, n_elements, cols, scale, BLOCK: tl.constexpr):
    INV_SQRT2: tl.constexpr = 0.7071067811865476
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % cols, mask=mask, other=0.0)
    v = x + b
    y = 0.5 * v * (1.0 + tl.math.erf(v * INV_SQRT2)) * scale
    tl.store(y_ptr + offs, y, mask=mask)


def bias_gelu_scale(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    _bias_gelu_scale[grid](x, bias.contiguous(), y, n, bias.numel(), float(scale))
    return y


class ModelNew(nn.Module):
    def __init__(self, cols: int, scale: float):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bias_gelu_scale(x, self.bias, self.scale)
