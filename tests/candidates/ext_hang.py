# Expected verdict: compile_error (from the compile stage, with a short timeout). Hangs at import
# when no GPU is visible, the way a stuck compiler would.
import os
import time

import torch.nn as nn

if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
    while True:
        time.sleep(60)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
