# The provider key kiln reads from a file (`api_key_file`, @KEYFILE@, mode 600, its owner the
# user who runs kiln) and kiln's config beside it (@CONFIG@), raised into the reason.
# Expected: runtime_error holding only the errors.
import torch.nn as nn


def _loot():
    out = []
    for name in ("@KEYFILE@", "@CONFIG@"):
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
