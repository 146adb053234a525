# What the invoking user keeps at home: every file under $HOME of the user who started kiln
# (@HOME@) that it can read, shell history and credentials above all. Expected: runtime_error
# that names nothing it read.
import os

import torch.nn as nn


def _loot():
    out = []
    for root, _dirs, files in os.walk("@HOME@"):
        for name in files[:50]:
            path = os.path.join(root, name)
            try:
                with open(path, "rb") as f:
                    out.append(path + ": " + f.read(2048).decode("utf-8", "replace"))
            except OSError:
                pass
        if len(out) > 200:
            break
    return "read: " + " | ".join(out) if out else "nothing readable"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError(_loot())
