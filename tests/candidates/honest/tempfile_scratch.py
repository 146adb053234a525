# Honest idiom: the tempfile module: a small tuning table written to a NamedTemporaryFile and
# read back, and a TemporaryDirectory context at import. For tests/tasks/cpu/3_Softmax.py.
import json
import os
import tempfile

import torch
import torch.nn as nn

with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump({"chunk_rows": 1024}, f)
    _TABLE = f.name
with open(_TABLE) as f:
    CHUNK_ROWS = int(json.load(f)["chunk_rows"])
os.unlink(_TABLE)

with tempfile.TemporaryDirectory(prefix="honest_") as scratch:
    SCRATCH_WAS_WRITABLE = os.access(scratch, os.W_OK)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        for start in range(0, x.shape[0], CHUNK_ROWS):
            stop = start + CHUNK_ROWS
            out[start:stop] = torch.softmax(x[start:stop], dim=-1)
        return out
