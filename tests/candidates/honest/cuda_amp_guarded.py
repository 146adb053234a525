# Honest idiom: torch.cuda.amp.autocast(enabled=x.is_cuda) with a float16 dtype and a cast back
# to float32; on the CPU the context is disabled and the MLP runs in float32.
# For tests/tasks/cpu/1_MLP.py.
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

    def forward(self, x):
        with torch.cuda.amp.autocast(enabled=x.is_cuda, dtype=torch.float16):
            y = self.net(x)
        return y.to(torch.float32)
