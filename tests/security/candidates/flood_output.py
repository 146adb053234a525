# 64 MB on stdout and on stderr, then an error: what reaches the verdict, the log and a fix
# prompt is a bounded tail. Expected: runtime_error.
import sys

import torch.nn as nn

_line = "x" * 1023 + "\n"
for _ in range(64 * 1024):
    sys.stdout.write(_line)
    sys.stderr.write(_line)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("after the flood")
