# kiln bench candidate for ../tasks/3_LayerNormResidual.py: plain PyTorch layer norm written out:
# v = x + residual centred in place, the variance from the centred values (two-pass), the
# normalisation in place and the affine as one addcmul.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(hidden))
        self.bias = nn.Parameter(0.2 * torch.randn(hidden))
        self.hidden = hidden
        self.eps = eps

    def forward(self, x, residual):
        with torch.no_grad():
            v = x + residual
            v.sub_(v.mean(dim=-1, keepdim=True))
            var = (v * v).mean(dim=-1, keepdim=True)
            v.mul_(torch.rsqrt(var.add_(self.eps)))
            return torch.addcmul(self.bias, v, self.weight)
