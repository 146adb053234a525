# Opens files until it may open no more, keeps them, then computes honestly: the harness must
# still write its outputs and result. Expected: correct, or runtime_error naming the limit;
# either way the next evaluation is unaffected.
import os

import torch
import torch.nn as nn

_held = []
try:
    while len(_held) < 1 << 20:
        _held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
for _fd in _held[-64:]:  # room for the harness's own files
    os.close(_fd)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
