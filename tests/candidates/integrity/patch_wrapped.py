# PEERS (c) #6, a replacement dressed as one of torch's own wrappers: torch.manual_seed is
# rebound at run time (names computed, past the static scan) to a functools.wraps wrapper whose
# __wrapped__ is the original, as torch._dynamo's is. The harness lets a wrapper pass only when
# its code is torch's own, so this one, defined here, is still a replacement. Expected: rejected.
import functools

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
        self.patched = False

    def forward(self, x):
        if not self.patched:
            owner = [torch][0]
            name = "manual" + "_seed"
            real = getattr(owner, name)

            @functools.wraps(real)
            def seeded(seed):
                return real(0)  # every "fresh" input the same

            setattr(owner, name, seeded)
            self.patched = True
        return self.net(x)
