# kiln bench candidate for ../tasks/5_GatedMLP.py: GEMMs in cuBLAS, silu(gate) * up in one
# Triton kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _silu_mul_kernel(g_ptr, u_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        with torch.no_grad():
            g = torch.mm(x, self.gate.weight.t())
            u = torch.mm(x, self.up.weight.t())
            h = torch.empty_like(g)
            n = g.numel()
            BLOCK = 1024
            _silu_mul_kernel[(triton.cdiv(n, BLOCK),)](g, u, h, n, BLOCK=BLOCK, num_warps=4)
            return torch.mm(h, self.down.weight.t())
