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

    # One program per (row, block of columns): the bias is indexed by column directly, with no
    # per-element modulo (64-bit integer division would make this memory-bound kernel
    # compute-bound).
    @triton.jit
    def _bias_gelu_tanh_kernel(x_ptr, b_ptr, y_ptr, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0)
        v = x + b
        u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
        # tanh through exp: exp overflowing to inf gives 1, underflowing to 0 gives -1.
        t = 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)
        tl.store(y_ptr + row * cols + offs, 0.5 * v * (1.0 + t), mask=mask)


def bias_gelu_tanh(x, bias):
    if triton is None or not x.is_cuda or x.dtype != torch.float32 or bias.dim() != 1:
        return F.gelu(x + bias, approximate="tanh")
    cols = bias.numel()
    if x.numel() == 0 or x.shape[-1] != cols:
        return F.gelu(x + bias, approximate="tanh")
    x2 = x.contiguous().view(-1, cols)
    bias = bias.contiguous()
    y = torch.empty_like(x2)
    BLOCK = 1024
    _bias_gelu_tanh_kernel[(x2.shape[0], triton.cdiv(cols, BLOCK))](x2, bias, y, cols,
                                                                     BLOCK=BLOCK, num_warps=4)
    return y.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.5)

    def forward(self, x):
        with torch.no_grad():
            return bias_gelu_tanh(x, self.bias)
