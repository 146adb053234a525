# Issue 14's probe: the timing function replaced through sys.modules, by computed names and
# through os.sys, with a wrapper that scales every sample down. Expected: correct at its honest
# figure: the timing module is no longer in sys.modules and the harness calls its own reference
# to time_calls, so the patch finds nothing to replace.
import os

import torch.nn as nn


def _patch():
    module = getattr(os, "sy" + "s").modules.get("kiln_" + "timing")
    if module is None:
        return
    real = getattr(module, "time_" + "calls")

    def scaled(*args, **kwargs):
        samples, wall = real(*args, **kwargs)
        return [s * 0.5 for s in samples], wall

    setattr(module, "time_" + "calls", scaled)


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
            self.patched = True
            _patch()
        return self.net(x)
