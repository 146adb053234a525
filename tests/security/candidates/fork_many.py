# Fifty children that sleep for an hour, each in a process group of its own, then the honest
# softmax. Expected: correct, and none of them alive once the evaluation is over.
import os

import torch
import torch.nn as nn

for _ in range(50):
    if getattr(os, "fo" + "rk")() == 0:
        os.setpgid(0, 0)
        getattr(os, "exe" + "cv")("/bin/sleep", ["/bin/sleep", "3600", "kiln-sec-@MARK@"])


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
