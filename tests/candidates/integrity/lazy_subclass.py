# PEERS (c) #5, lazy evaluation: forward returns a tensor subclass that holds a thunk and only
# computes when some torch function touches it, i.e. when the harness saves it, long after the
# timed call. Expected: rejected, the output is not a plain torch.Tensor.
import torch
import torch.nn as nn


class Lazy(torch.Tensor):
    @staticmethod
    def __new__(cls, thunk, shape):
        t = torch.Tensor._make_subclass(cls, torch.empty(shape))
        t.thunk = thunk
        return t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        args = [a.thunk() if isinstance(a, Lazy) else a for a in args]
        return func(*args, **kwargs)


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        layers = []
        width = in_features
        for h in hidden_sizes:
            layers.append(nn.Linear(width, h))
            layers.append(nn.ReLU())
            width = h
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)
        self.out_features = out_features

    def forward(self, x):
        x = x.clone()
        with torch._C.DisableTorchFunction():
            return Lazy(lambda: self.net(x), (x.shape[0], self.out_features))
