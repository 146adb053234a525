# Not a candidate: a DEGENERATE task for the corpus (PEERS (c) #10). The output depends on the
# weights only, never on the input, so any constant of the right values passes it.
import torch
import torch.nn as nn

batch_size = 32
features = 128


class Model(nn.Module):
    """Row sums of a Linear layer's weight; x is read and ignored."""

    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return self.linear.weight.sum(dim=1) + 0.0 * x.sum()


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
