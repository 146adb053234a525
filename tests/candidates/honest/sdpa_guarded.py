# Honest idiom: F.scaled_dot_product_attention when torch has it (hasattr / getattr with a
# default), the explicit softmax(QK^T)V on torch 1.13. For tests/tasks/cpu/5_Attention.py.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

_SDPA = getattr(F, "scaled_dot_product_attention", None)
HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def attention(q, k, v):
    if HAS_SDPA and _SDPA is not None:
        return _SDPA(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.matmul(torch.softmax(scores, dim=-1), v)


class ModelNew(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def _heads(self, t):
        b, s, _ = t.shape
        return t.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        b, t, e = x.shape
        y = attention(self._heads(self.q_proj(x)), self._heads(self.k_proj(x)),
                      self._heads(self.v_proj(x)))
        return self.out_proj(y.transpose(1, 2).reshape(b, t, e))
