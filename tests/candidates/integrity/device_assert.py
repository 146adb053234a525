# PEERS (c) #14, an error that poisons the process (on CUDA an out-of-bounds index is a device
# assert that breaks the context for good). Expected: runtime_error; the next evaluation on the
# same engine is unaffected because every runner is a fresh process.
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
        y = self.net(x)
        index = torch.full((y.shape[0],), 1 << 40, dtype=torch.long, device=y.device)
        return y[index]
