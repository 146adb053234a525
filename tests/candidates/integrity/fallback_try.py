# PEERS (c) #8, "not really writing the kernel": a custom path that always fails, silently
# replaced by the reference's own ops. Not an integrity breach in kiln (DESIGN: any PyTorch op
# is allowed); it earns no speedup, which is the only reward there is. Expected: correct.
import torch.nn as nn


def _custom_kernel(x):
    raise RuntimeError("not implemented")


class ModelNew(nn.Module):
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
        try:
            return _custom_kernel(x)
        except RuntimeError:
            return self.net(x)
