# Honest idiom: `with ... as ...` contexts: torch.no_grad, contextlib.ExitStack, nullcontext,
# torch.autograd.profiler.record_function, and an `except ... as err` fallback.
# For tests/tasks/cpu/5_Attention.py.
import contextlib
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
        with torch.no_grad() as _, contextlib.ExitStack() as stack:
            stack.enter_context(torch.autograd.profiler.record_function("honest_attention"))
            with contextlib.nullcontext() as nothing:
                assert nothing is None
                q = self.q_proj(x).view(b, t, h, d).transpose(1, 2)
                k = self.k_proj(x).view(b, t, h, d).transpose(1, 2)
                v = self.v_proj(x).view(b, t, h, d).transpose(1, 2)
            try:
                scores = q @ k.transpose(-2, -1) / math.sqrt(d)
            except RuntimeError as err:
                raise RuntimeError("attention scores failed") from err
            y = torch.softmax(scores, dim=-1) @ v
        return self.out_proj(y.transpose(1, 2).reshape(b, t, e))
