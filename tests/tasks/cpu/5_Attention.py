# Exercises: multi-head self-attention written out op by op (projections, scores, softmax, matmuls).
import math

import torch
import torch.nn as nn

batch_size = 4
seq_len = 128
embed_dim = 256
num_heads = 8
input_scale = 2.0  # sharpens the attention so the output is not a near-uniform average


class Model(nn.Module):
    """Unmasked multi-head self-attention; no torch 2 APIs (runs on torch 1.13 and 2.x)."""

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        b, t, e = x.shape
        h, d = self.num_heads, self.head_dim
        q = self.q_proj(x).view(b, t, h, d).transpose(1, 2)  # (b, h, t, d)
        k = self.k_proj(x).view(b, t, h, d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, h, d).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)  # (b, h, t, t)
        attn = torch.softmax(scores, dim=-1)
        y = torch.matmul(attn, v)  # (b, h, t, d)
        y = y.transpose(1, 2).contiguous().view(b, t, e)
        return self.out_proj(y)


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim) * input_scale]


def get_init_inputs():
    return [embed_dim, num_heads]
