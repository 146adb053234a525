# Honest idiom: a per-user cache path worked out at import, as libraries do (getpass.getuser(),
# "~" expanded, pwd asked only when the name is not in the environment), then used only for a
# label. The runner's uid may have no account on the host. For tests/tasks/cpu/3_Softmax.py.
import getpass
import os
import tempfile

import torch
import torch.nn as nn

USER = getpass.getuser()
HOME_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "softmax_rows")
TMP_CACHE = os.path.join(tempfile.gettempdir(), "softmax_rows_" + USER)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.label = USER + "@" + HOME_CACHE + ":" + TMP_CACHE

    def forward(self, x):
        shifted = x - x.amax(dim=-1, keepdim=True)
        e = shifted.exp()
        return e / e.sum(dim=-1, keepdim=True)
