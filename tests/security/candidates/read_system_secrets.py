# Issue 14's third probe: root's and the system's secrets, and a file only the user who runs
# kiln may read (@PLANTED@, mode 600), raised into the reason. Expected: runtime_error that holds
# only the errors.
import torch.nn as nn


def _loot():
    out = []
    for name in ("/etc/shadow", "/root/.bashrc", "/root/.ssh/id_rsa", "/etc/gshadow", "@PLANTED@"):
        try:
            with open(name, "rb") as f:
                out.append(name + ": " + f.read().decode("utf-8", "replace"))
        except OSError as e:
            out.append(name + ": " + (e.strerror or str(e)))
    return " | ".join(out)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError(_loot())
