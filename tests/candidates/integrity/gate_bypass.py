# PEERS (c) #16, the harness's own controls turned off: at import the candidate replaces the
# function through which the harness asks the evaluator for its go after the trials, so it is
# timed without asking (beside other lanes' untimed work, before its outputs were judged). The
# module table is reached through getattr with a built name, which the static scan cannot
# follow. Expected: rejected (the evaluator holds timing samples it never said go for).
import sys

import torch.nn as nn

_main = vars(getattr(sys, "mod" + "ules")["__" + "main__"])
_main["_ga" + "te"] = lambda fd: True


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
