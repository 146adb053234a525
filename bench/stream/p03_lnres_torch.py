# kiln bench candidate for ../tasks/3_LayerNormResidual.py: plain PyTorch; the residual sum is
# computed into a tensor that layer_norm consumes directly, without autograd.
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
            s = torch.add(x, residual)
            return torch.layer_norm(s, [self.hidden], self.weight, self.bias, self.eps)
