# Expected verdict: correct. An honest rewrite of tests/tasks/cpu/1_MLP.py: the same parameters
# created in the same order (so the seeded weights match), run without autograd bookkeeping.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        layers = []
        width = in_features
        for h in hidden_sizes:
            layers.append(nn.Linear(width, h))
            width = h
        layers.append(nn.Linear(width, out_features))
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        with torch.inference_mode():
            last = len(self.layers) - 1
            for i, layer in enumerate(self.layers):
                x = torch.addmm(layer.bias, x, layer.weight.t())
                if i != last:
                    x = torch.relu_(x)
            return x
