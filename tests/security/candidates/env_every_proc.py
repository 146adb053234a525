# Every process it can see: environ, cmdline and maps of each /proc/<pid>, raised whole.
# Expected: runtime_error, no secret of kiln's and no path of its config in it.
import os

import torch.nn as nn


def _loot():
    out = []
    for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
        for part in ("environ", "cmdline", "maps"):
            try:
                with open(os.path.join("/proc", pid, part), "rb") as f:
                    out.append(pid + "/" + part + ": " + f.read().decode("utf-8", "replace"))
            except OSError as e:
                out.append(pid + "/" + part + ": " + e.strerror)
    return " | ".join(out)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError(_loot())
