# Honest idiom: @property, @staticmethod and @classmethod helpers on ModelNew, and a class-level
# constant. For tests/tasks/cpu/4_LayerNorm.py.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    EPS = 1e-5

    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape, eps=self.EPS)

    @property
    def dims(self):
        return tuple(range(-len(self.ln.normalized_shape), 0))

    @staticmethod
    def _normalize(x, dims, eps):
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps)

    @classmethod
    def eps_for(cls, dtype):
        return cls.EPS if dtype == torch.float32 else 1e-3

    def forward(self, x):
        y = self._normalize(x, self.dims, self.eps_for(x.dtype))
        return y * self.ln.weight + self.ln.bias
