# kiln bench candidate for ../tasks/1_BiasGeluScale.py: a Triton kernel fusing bias, GELU and
# scale. The same @triton.jit source is reused by t05 for another task.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _bias_gelu_scale_kernel(x_ptr, b_ptr, y_ptr, n, cols, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs % cols, mask=mask, other=0.0)
    v = x + b
    y = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476)) * scale
    tl.store(y_ptr + offs, y, mask=mask)


def bias_gelu_scale(x, bias, scale):
    x = x.contiguous()
    bias = bias.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    _bias_gelu_scale_kernel[grid](x, bias, y, n, bias.numel(), float(scale), BLOCK=BLOCK,
                                  num_warps=4)
    return y


class ModelNew(nn.Module):
    def __init__(self, cols, scale):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)
        self.scale = scale

    def forward(self, x):
        with torch.no_grad():
            return bias_gelu_scale(x, self.bias, self.scale)
