# A hook that would hang the runner at exit (an atexit handler that sleeps for an hour), then
# the honest softmax. Expected: correct, the runner gone at once.
import atexit
import time

import torch
import torch.nn as nn

atexit.register(time.sleep, 3600)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
