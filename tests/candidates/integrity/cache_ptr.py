# PEERS (c) #2, result caching keyed on the input's address (what CUDA-L1's RL found): computes
# once per data_ptr() and replays afterwards. Correct on every fresh trial, ~free while timed.
# Expected: rejected by the post-timing re-check (fresh values in the same tensors).
import torch
import torch.nn as nn


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
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.cache:
            self.cache[key] = self.net(x)
        return self.cache[key].clone()
