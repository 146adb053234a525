# The honest candidate run after every hostile one: the task's own softmax. Expected: correct.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
