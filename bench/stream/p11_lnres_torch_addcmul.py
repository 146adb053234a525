# kiln bench candidate for ../tasks/3_LayerNormResidual.py: plain PyTorch; layer_norm without its
# affine on x + residual, then the weight and bias applied in place on the normalised tensor.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(hidden))
        self.bias = nn.Parameter(0.2 * torch.randn(hidden))
        self.hidden = hidden
        self.eps = eps

    def forward(self, x, residual):
        with torch.no_grad():
            n = F.layer_norm(torch.add(x, residual), (self.hidden,), None, None, self.eps)
            return n.mul_(self.weight).add_(self.bias)
