# Honest idiom: functools.partial for a preset softmax, a functools.wraps decorator that checks
# shapes, and operator-module helpers. For tests/tasks/cpu/5_Attention.py.
import functools
import math
import operator

import torch
import torch.nn as nn

softmax_last = functools.partial(torch.softmax, dim=-1)


def expects_3d(fn):
    @functools.wraps(fn)
    def wrapper(self, x, *args, **kwargs):
        if x.dim() != 3:
            raise ValueError(f"{fn.__name__}: expected (batch, seq, embed), got {tuple(x.shape)}")
        return fn(self, x, *args, **kwargs)

    return wrapper


class ModelNew(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = operator.floordiv(embed_dim, num_heads)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.scale = 1.0 / math.sqrt(self.head_dim)

    @expects_3d
    def forward(self, x):
        b, t, e = x.shape
        split = functools.partial(torch.Tensor.view, size=(b, t, self.num_heads, self.head_dim))
        q = split(self.q_proj(x)).transpose(1, 2)
        k = split(self.k_proj(x)).transpose(1, 2)
        v = split(self.v_proj(x)).transpose(1, 2)
        attn = softmax_last(torch.baddbmm(
            torch.zeros(b * self.num_heads, t, t, dtype=x.dtype, device=x.device),
            q.reshape(-1, t, self.head_dim), k.reshape(-1, t, self.head_dim).transpose(1, 2),
            beta=0.0, alpha=self.scale))
        y = torch.bmm(attn, v.reshape(-1, t, self.head_dim)).view(b, self.num_heads, t, -1)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, e))
