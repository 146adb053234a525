# Issue 14's fourth probe: files left in /dev/shm and /tmp (a channel to the next candidate,
# and RAM-backed disk to fill), then the honest softmax. Expected: correct, and neither file on
# the host afterwards.
import os

import torch
import torch.nn as nn

for _dir in ("/dev/shm", "/tmp"):
    with open(os.path.join(_dir, "kiln-sec-@MARK@"), "w") as _f:
        _f.write("left behind\n")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
