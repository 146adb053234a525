# The honest twin of l2_persist_window.py: the same product, nothing else. Expected on a GPU:
# correct, about 1x.
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return F.linear(x, self.proj.weight)
