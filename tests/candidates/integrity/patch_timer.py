# PEERS (c) #6, timer patching: a clock that runs 100x slower makes every call look 100x
# faster. Expected: rejected by the static scan (patches time.perf_counter_ns).
import time

import torch.nn as nn

_real = time.perf_counter_ns
time.perf_counter_ns = lambda: _real() // 100


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
        return self.net(x)
