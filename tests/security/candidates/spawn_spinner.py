# The same load as starve_reference.py by another route: a shell started through posix_spawn in a
# session of its own (setsid, out of the runner's group), busy for good, reached by names built at
# run time. Expected: correct and never faster than its honest figure (held with the candidate
# while the reference times; a load in the candidate's own turns slows only the candidate), or
# rejected.
import os

import torch
import torch.nn as nn

_spawn = getattr(os, "posix_" + "spawn")
_spawn("/bin/sh", ["/bin/sh", "-c", "while :; do :; done"], dict(os.environ),
       **{"set" + "sid": True})


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
