# Honest idiom: the spellings of the base constructor call: super(ModelNew, self).__init__(),
# nn.Module.__init__(self) in a helper, and super().__init__() with a mixin.
# For tests/tasks/cpu/4_LayerNorm.py.
import torch
import torch.nn as nn


class _Affine(nn.Module):
    def __init__(self, shape):
        nn.Module.__init__(self)
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        return torch.addcmul(self.bias, x, self.weight)


class _Describe:
    def describe(self):
        return type(self).__name__


class ModelNew(nn.Module, _Describe):
    def __init__(self, normalized_shape):
        super(ModelNew, self).__init__()
        self.affine = _Affine(tuple(normalized_shape))
        self.eps = 1e-5

    def forward(self, x):
        var, mean = torch.var_mean(x, dim=(-2, -1), unbiased=False, keepdim=True)
        return self.affine((x - mean) * torch.rsqrt(var + self.eps))
