# PEERS (c) #5, an output without storage: a meta tensor has the right shape and dtype and no
# data at all. Expected: rejected, the output has no real storage.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        self.out_features = out_features

    def forward(self, x):
        return torch.empty(x.shape[0], self.out_features, device="meta")
