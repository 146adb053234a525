# Honest idiom: forward wrapped in torch.inference_mode() (also as a decorator on a helper).
# For tests/tasks/cpu/1_MLP.py.
import torch
import torch.nn as nn


@torch.inference_mode()
def _run(layers, x):
    for layer in layers:
        x = layer(x)
    return x


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        mods = []
        width = in_features
        for h in hidden_sizes:
            mods += [nn.Linear(width, h), nn.ReLU(inplace=True)]
            width = h
        mods.append(nn.Linear(width, out_features))
        self.layers = nn.ModuleList(mods)

    def forward(self, x):
        with torch.inference_mode():
            return _run(self.layers, x)
