# A process that leaves the runner's session and process group (setsid, double fork) and
# sleeps for an hour with the run's mark in its command line, then the honest softmax.
# Expected: correct, and no such process once the evaluation is over.
import os

import torch
import torch.nn as nn

_pid = getattr(os, "fo" + "rk")()
if _pid == 0:
    os.setsid()
    if getattr(os, "fo" + "rk")() == 0:
        getattr(os, "exe" + "cv")("/bin/sleep", ["/bin/sleep", "3600", "kiln-sec-@MARK@"])
    os._exit(0)
os.waitpid(_pid, 0)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
