# PEERS (c) #2, result caching keyed on the input's values (a checksum of the bytes, not the
# address): computes once per distinct input and replays afterwards, printing "cache hit" each
# time it replays. The timing's rotating input sets are clones, so without fresh values per
# timed call every call after the first round would be a hit, nearly free; the re-check's fresh
# values miss the cache and are computed honestly, so the verdict is `correct` either way.
# Expected: correct, with no "cache hit" in its output (tests/gpu/integrity_test.cpp).
import hashlib

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
        self.answers = {}

    def forward(self, x):
        key = hashlib.sha1(x.detach().cpu().contiguous().numpy().tobytes()).hexdigest()
        if key in self.answers:
            print("cache hit", flush=True)
            return self.answers[key].clone()
        out = self.net(x)
        self.answers[key] = out.detach().clone()
        return out
