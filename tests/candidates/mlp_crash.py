# Expected verdict: runtime_error. Builds fine, then raises in forward.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden_sizes, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        raise RuntimeError("kiln test: this candidate always fails in forward")
