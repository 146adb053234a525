# The harness's socket to kiln, found among its descriptors: the candidate writes the timing
# loop's stamps itself (a flood of per-call stamps and a steady batch) before the harness has
# timed anything. Expected: rejected (the stamps and the samples disagree), never correct.
import os
import stat

import torch
import torch.nn as nn

for _fd in range(64):
    try:
        if stat.S_ISSOCK(os.fstat(_fd).st_mode):
            os.write(_fd, b"p\n" + b"c\n" * 50 + b"s\ne 4\n")
    except OSError:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
