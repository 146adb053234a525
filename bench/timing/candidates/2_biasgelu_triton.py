# kiln timing benchmark candidate for ../tasks/2_BiasGeluTanh.py: one Triton kernel reads x and
# the bias and writes y once (the task's eager code makes two passes). Where Triton is missing
# or the input is not on a GPU (a CPU run of the benchmark), the same formula runs as torch ops.
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
    def _bias_gelu_tanh_kernel(x_ptr, b_ptr, y_ptr, n, cols, BLOCK: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + offs % cols, mask=mask, other=0.0)
        v = x + b
        u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
        # tanh through exp: exp overflowing to inf gives 1, underflowing to 0 gives -1.
        t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)
        tl.store(y_ptr + offs, 0.5 * v * (1.0 + t), mask=mask)


def bias_gelu_tanh(x, bias):
    if triton is None or not x.is_cuda or x.dtype != torch.float32:
        return F.gelu(x + bias, approximate="tanh")
    x = x.contiguous()
    bias = bias.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    BLOCK = 2048
    _bias_gelu_tanh_kernel[(triton.cdiv(n, BLOCK),)](x, bias, y, n, bias.numel(), BLOCK=BLOCK,
                                                      num_warps=8)
    return y


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)

    def forward(self, x):
        with torch.no_grad():
            return bias_gelu_tanh(x, self.bias)
