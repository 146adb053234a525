# Privileges it should not have: becoming root, lowering its own OOM score so that kiln dies
# first, raising its limit of open files past the one kiln set. Expected: correct.
import os
import resource

import torch
import torch.nn as nn

_adj = os.path.join(os.sep, "proc", "self", "oom_score_adj")


def _write(path, data):
    # Unbuffered: a buffered file would report the kernel's refusal only when it is closed.
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


_worked = []
for _name, _step in (
        ("setuid(0)", lambda: os.setuid(0)),
        ("setgid(0)", lambda: os.setgid(0)),
        ("oom_score_adj -1000", lambda: _write(_adj, b"-1000")),
        ("RLIMIT_NOFILE raised", lambda: resource.setrlimit(
            resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1] + 1,) * 2)),
):
    try:
        _step()
        _worked.append(_name)
    except (OSError, ValueError):
        pass
with open(_adj) as _f:
    if int(_f.read()) < 0:
        _worked.append("oom_score_adj below 0")
if os.getuid() == 0 or os.geteuid() == 0:
    _worked.append("runs as root")


class ModelNew(nn.Module):
    def forward(self, x):
        if _worked:
            raise RuntimeError("allowed: " + ", ".join(_worked))
        return torch.softmax(x, dim=-1)
