# Exercises: a plain Linear/ReLU stack (GEMM-bound; fusing bias+ReLU, batching, lower precision).
import torch
import torch.nn as nn

batch_size = 64
in_features = 512
hidden_sizes = [1024, 1024]
out_features = 256
input_scale = 2.0  # default Linear init shrinks activations; keep the output well above 1e-2


class Model(nn.Module):
    """Multi-layer perceptron: (Linear -> ReLU) for each hidden size, then a final Linear."""

    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        layers = []
        width = in_features
        for h in hidden_sizes:
            layers.append(nn.Linear(width, h))
            layers.append(nn.ReLU())
            width = h
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(batch_size, in_features) * input_scale]


def get_init_inputs():
    return [in_features, hidden_sizes, out_features]
