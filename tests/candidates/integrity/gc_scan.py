# PEERS (c) #16, scanning the garbage collector for the harness's tensors (e.g. the reference's
# outputs in a shared process). Expected: rejected by the static scan (gc.get_objects).
import gc

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

    def forward(self, x):
        for obj in gc.get_objects():
            if isinstance(obj, torch.Tensor) and obj.shape == (x.shape[0], 256):
                return obj.clone()
        return self.net(x)
