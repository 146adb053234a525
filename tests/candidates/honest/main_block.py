# Honest idiom: a self-test under `if __name__ == "__main__":` that times the model with
# time.perf_counter (it never runs when kiln imports the file). For tests/tasks/cpu/8_GeluTail.py.
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features, scale_factor, clamp_min, clamp_max):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale_factor = scale_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = F.gelu(torch.addmm(self.bias + self.linear.bias, x, self.linear.weight.t()))
        return y.mul_(self.scale_factor).clamp_(self.clamp_min, self.clamp_max).add_(x)


if __name__ == "__main__":
    model = ModelNew(1024, 2.0, -0.5, 1.0)
    x = torch.randn(128, 1024)
    start = time.perf_counter()
    for _ in range(10):
        model(x)
    print("ms per call:", (time.perf_counter() - start) * 100.0)
