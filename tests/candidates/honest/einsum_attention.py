# Honest idiom: attention written with torch.einsum for the projections' reshapes and both
# matmuls. For tests/tasks/cpu/5_Attention.py.
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        b, t, e = x.shape
        h, d = self.num_heads, self.head_dim
        q = self.q_proj(x).view(b, t, h, d)
        k = self.k_proj(x).view(b, t, h, d)
        v = self.v_proj(x).view(b, t, h, d)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(d))
        attn = scores.softmax(dim=-1)
        y = torch.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, t, e)
        return self.out_proj(y)
