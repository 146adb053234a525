# Honest idiom: type aliases (`Tensor = torch.Tensor`, `Shape = Tuple[int, ...]`), a
# `typing.TypeAlias` annotation and annotated locals in an attention rewrite that fuses the three
# projections into one matmul. For tests/tasks/cpu/5_Attention.py.
import math
from typing import Tuple, TypeAlias

import torch
import torch.nn as nn

Tensor = torch.Tensor
Shape: TypeAlias = Tuple[int, ...]
Heads = Tuple[Tensor, Tensor, Tensor]


def split_heads(t: Tensor, heads: int) -> Tensor:
    b, s, e = t.shape
    return t.view(b, s, heads, e // heads).transpose(1, 2)


class ModelNew(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads: int = num_heads
        self.head_dim: int = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def qkv(self, x: Tensor) -> Heads:
        w: Tensor = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        b: Tensor = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        q, k, v = torch.nn.functional.linear(x, w, b).chunk(3, dim=-1)
        h = self.num_heads
        return split_heads(q, h), split_heads(k, h), split_heads(v, h)

    def forward(self, x: Tensor) -> Tensor:
        shape: Shape = tuple(x.shape)
        q, k, v = self.qkv(x)
        scores: Tensor = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        y: Tensor = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out_proj(y.transpose(1, 2).reshape(shape))
