# Every descriptor it inherited: where each points, and the first bytes of each one readable.
# Expected: runtime_error; nothing but its own files, pipes, the device and the harness socket.
import os

import torch.nn as nn


def _loot():
    out = []
    fds = os.path.join(os.sep, "proc", "self", "fd")  # built: past the static scan
    for fd in sorted(int(n) for n in os.listdir(fds)):
        try:
            target = os.readlink(os.path.join(fds, str(fd)))
        except OSError as e:
            target = e.strerror
        head = ""
        try:
            if os.path.isfile(target):
                with open(target, "rb") as f:
                    head = f.read(4096).decode("utf-8", "replace")
        except OSError as e:
            head = e.strerror
        out.append("%d -> %s %s" % (fd, target, head))
    return " | ".join(out)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError(_loot())
