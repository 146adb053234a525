# PEERS (c) #17, the scored path is not the checked path: honest for the first three calls (the
# trials), then it returns its last answer without computing (the timed calls). Expected:
# rejected by the post-timing re-check.
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
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        if self.calls <= 3 or self.last is None:
            self.last = self.net(x)
        return self.last.clone()
