# PEERS (c) #4, background threads: computes in a worker thread and returns before it is done.
# Expected: rejected by the static scan (threading).
import threading

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        out = torch.empty(x.shape[0], self.proj.out_features)
        threading.Thread(target=lambda: out.copy_(self.proj(x))).start()
        return out
