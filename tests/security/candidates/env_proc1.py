# Issue 14's first probe: /proc/1/environ of the runner's PID namespace (the path built at run
# time, past the static scan), raised into the verdict's reason, and from there the archive and
# the error fixer's prompt. Expected: runtime_error with no secret of kiln's in it.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        name = "/".join(["", "proc", str(1), "environ"])
        with open(name, "rb") as f:
            found = f.read().decode("utf-8", "replace")
        raise RuntimeError("pid 1 has: " + found.replace("\0", " | "))
