# Honest idiom: ordinary environment variables read at import (os.environ.get, os.getenv,
# "in os.environ") to pick a chunk size and a thread count. For tests/tasks/cpu/3_Softmax.py.
import os

import torch
import torch.nn as nn

CHUNK = int(os.environ.get("HONEST_SOFTMAX_CHUNK", "4096"))
DEBUG = os.getenv("HONEST_DEBUG", "0") == "1"
OMP_THREADS = os.environ["OMP_NUM_THREADS"] if "OMP_NUM_THREADS" in os.environ else None
CUDA_HOME = os.environ.get("CUDA_HOME")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.chunk = max(1, CHUNK)
        if DEBUG:
            print("softmax chunk", self.chunk, "threads", OMP_THREADS, "cuda", CUDA_HOME)

    def forward(self, x):
        parts = [torch.softmax(rows, dim=-1) for rows in torch.split(x, self.chunk, dim=0)]
        return torch.cat(parts, dim=0)
