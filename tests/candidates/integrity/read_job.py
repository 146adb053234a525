# PEERS (c) #16, reading the harness's files: the job (seeds, paths) from its folder. Expected:
# rejected by the static scan (job.json).
import json

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
        with open("job.json") as f:
            self.job = json.load(f)

    def forward(self, x):
        return self.net(x)
