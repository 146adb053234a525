# PEERS (c) #16, the harness's own controls turned off: at import the candidate replaces the
# function through which the harness asks the evaluator for its go after the trials, so it is
# timed without asking (beside other lanes' untimed work, before its outputs were judged). It
# reaches the module table through os, by names built at run time, which the static scan cannot
# follow. Expected: rejected (the evaluator holds timing samples it never said go for).
import os

import torch.nn as nn

_main = vars(getattr(os, "sy" + "s"))["mod" + "ules"]["__" + "main__"]
vars(_main)["_ga" + "te"] = lambda fd, message=None: "time"


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
