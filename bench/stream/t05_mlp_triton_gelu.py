# kiln bench candidate for ../tasks/4_MLPBlock.py: fc1 as a bare GEMM, a Triton bias + GELU
# epilogue (t01's kernel, scale 1), then fc2 with its bias folded into addmm.
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
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        with torch.no_grad():
            h = torch.mm(x, self.fc1.weight.t())
            h = bias_gelu_scale(h, self.fc1.bias, 1.0)
            return torch.addmm(self.fc2.bias, h, self.fc2.weight.t())
