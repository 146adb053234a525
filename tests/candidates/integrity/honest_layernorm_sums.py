# Honest: LayerNorm over the last two dims written out with sums (another reduction order than
# torch's kernel) and the affine folded into one addcmul. Expected: correct.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        b, c = x.shape[0], x.shape[1]
        flat = x.reshape(b, c, -1)
        n = flat.shape[-1]
        mean = flat.sum(dim=-1, keepdim=True) / n
        centered = flat - mean
        var = (centered * centered).sum(dim=-1, keepdim=True) / n
        normed = (centered * torch.rsqrt(var + self.ln.eps)).reshape(x.shape)
        return torch.addcmul(self.ln.bias, normed, self.ln.weight)
