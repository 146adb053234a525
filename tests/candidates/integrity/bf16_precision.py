# PEERS (c) #7, precision downgrade: the whole MLP in bfloat16, cast back to float32 at the end.
# kiln allows lower precision (DESIGN) when the result is within tolerance, and says so in a
# note. Expected: correct with a "reduced precision" note if inside the tolerance; the verdict
# is decided by the numbers either way.
import torch
import torch.nn as nn


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
        y = x.to(torch.bfloat16)
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                y = torch.nn.functional.linear(y, layer.weight.to(torch.bfloat16),
                                               layer.bias.to(torch.bfloat16))
            else:
                y = torch.relu(y)
        return y.float()
