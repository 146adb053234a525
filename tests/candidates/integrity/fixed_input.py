# PEERS (c) #9, overfitting to one fixed input: answers for the inputs of seed 0 (PIKE's fixed
# input seed) whatever it is given. Expected: incorrect, since kiln draws the input seeds per
# evaluation.
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
        state = torch.get_rng_state()
        torch.manual_seed(0)
        fixed = torch.randn(x.shape, device=x.device) * 2.0
        torch.set_rng_state(state)
        return self.net(fixed)
