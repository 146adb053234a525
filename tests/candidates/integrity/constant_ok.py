# PEERS (c) #10, a degenerate task exploited: against task_constant.py, returns the answer it
# computed once at construction. Expected: correct (nothing to catch: the task allows it),
# with a note that the reference's output does not depend on its inputs.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        with torch.no_grad():
            self.register_buffer("answer", self.linear.weight.sum(dim=1))

    def forward(self, x):
        return self.answer.clone()
