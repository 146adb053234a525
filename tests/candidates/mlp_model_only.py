# Expected verdict: correct, with a note. The way published solution sets write a candidate: the
# faster class is called Model (no ModelNew), as PIKE's evaluator accepts. Same parameters in
# the same order as tests/tasks/cpu/1_MLP.py, so the seeded weights match.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        layers = []
        width = in_features
        for h in hidden_sizes:
            layers.append(nn.Linear(width, h))
            width = h
        layers.append(nn.Linear(width, out_features))
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = torch.addmm(layer.bias, x, layer.weight.t())
            if i != last:
                x = torch.relu(x)
        return x


# A published file often keeps its own inputs; kiln uses the task's.
def get_inputs():
    return [torch.zeros(1, 1)]


def get_init_inputs():
    return [1, [1], 1]
