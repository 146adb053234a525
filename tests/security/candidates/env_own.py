# Its own environment, every variable. Expected: runtime_error; what kiln passes on is built
# for the runner, so no key of kiln's is in it.
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError(" ".join(k + "=" + v for k, v in sorted(os.environ.items())))
