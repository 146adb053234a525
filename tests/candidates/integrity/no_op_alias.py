# PEERS (c) #1, no-op output: does no work and hands back the input tensor itself, hoping the
# harness reads memory that already holds something plausible. Expected: rejected, the output
# shares storage with an input (the reference's does not).
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x
