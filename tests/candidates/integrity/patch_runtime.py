# PEERS (c) #6, timer patching hidden from the static scan: the module and the attribute name
# are computed, and the patch happens inside forward. Expected: rejected by the harness, which
# compares the identity of time.perf_counter_ns after every call with the one it saved.
import time

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
        self.patched = False

    def forward(self, x):
        if not self.patched:
            clock = [time][0]
            real = getattr(clock, "perf_counter" + "_ns")
            setattr(clock, "perf_counter" + "_ns", lambda: real() // 100)
            self.patched = True
        return self.net(x)
