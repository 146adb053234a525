# Expected verdict: compile_error (no_model_class). Imports fine but names its class neither
# ModelNew nor Model.
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.proj(x)
