# Honest idiom: the file defines only `class Model` (no ModelNew), as some published solution
# sets do; kiln takes Model then and says so in a note. For tests/tasks/cpu/3_Softmax.py.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)
