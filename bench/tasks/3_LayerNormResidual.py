# kiln bench task. Pre-norm residual step: LayerNorm(x + residual) with a non-trivial affine
# (weight around 1, bias around 0), over rows of 4096 floats. Eager: add + layer_norm (two
# kernels, the sum written and read back); a fused row kernel reads x and residual once.
# Expected on an H200, float32: ~0.05-0.1 ms.
import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 4096
hidden = 4096
eps = 1e-5


class Model(nn.Module):
    """layer_norm(x + residual) over the last dim, with learned weight and bias."""

    def __init__(self, hidden, eps):
        super().__init__()
        # Random affine (not the 1/0 defaults) so that a candidate that drops it is caught.
        self.weight = nn.Parameter(1.0 + 0.2 * torch.randn(hidden))
        self.bias = nn.Parameter(0.2 * torch.randn(hidden))
        self.hidden = hidden
        self.eps = eps

    def forward(self, x, residual):
        return F.layer_norm(x + residual, (self.hidden,), self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(rows, hidden), torch.randn(rows, hidden) * 0.5 + 0.25]


def get_init_inputs():
    return [hidden, eps]
