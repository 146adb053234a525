# Loads the host exactly while the reference times: at import it forks one child per core it may
# run on, each in a session of its own (out of the runner's process group), which spins whenever
# the candidate's forward has not been called for 20 ms (the reference's turns, the parent's
# comparisons) and naps while the candidate itself is timed. Without a hold on the candidate's
# whole process tree during the reference's turns, the reference runs slower on a busy host and
# the honest softmax below reports a speedup it does not have. Expected: correct, at about 1x.
import mmap
import os
import struct
import time

import torch
import torch.nn as nn

_beat = mmap.mmap(-1, 8)
_beat.write(struct.pack("d", 0.0))


def _spin():
    parent = os.getppid()
    while os.getppid() == parent:
        last = struct.unpack("d", _beat[:8])[0]
        if last > 0 and time.monotonic() - last > 0.02:
            until = time.monotonic() + 0.01
            while time.monotonic() < until:
                pass
        else:
            time.sleep(0.001)
    getattr(os, "_ex" + "it")(0)


for _ in range(len(os.sched_getaffinity(0))):
    if getattr(os, "fo" + "rk")() == 0:
        try:
            os.setsid()
            _spin()
        finally:
            getattr(os, "_ex" + "it")(0)


class ModelNew(nn.Module):
    def forward(self, x):
        _beat[:8] = struct.pack("d", time.monotonic())
        return torch.softmax(x, dim=-1)
