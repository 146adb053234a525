# Not a candidate: a task with redundant work for the corpus (PEERS (c) #12): the same ReLU is
# summed 200 times and averaged, so an algebraic rewrite is ~200x faster.
import torch
import torch.nn as nn

batch_size = 256
features = 1024
repeats = 200


class Model(nn.Module):
    """mean over `repeats` copies of relu(x)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        acc = torch.zeros_like(x)
        for _ in range(repeats):
            acc = acc + torch.relu(x)
        return acc / repeats


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return []
