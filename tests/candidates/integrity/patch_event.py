# PEERS (c) #6, CUDA event patching: every elapsed_time reads 1 us. Expected: rejected by the
# static scan (patches torch.cuda.Event.elapsed_time), on any device, before anything runs.
import torch
import torch.nn as nn

torch.cuda.Event.elapsed_time = lambda self, end: 0.001


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
