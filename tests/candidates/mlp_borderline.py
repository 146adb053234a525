# Expected verdict: correct, with a `borderline:` note. One output value per call lies 1.5x the
# allowed difference (atol + rtol |ref|) away from the reference, as reassociated sums or TF32
# can put a value: a handful of values just outside, the same on every input seed, judged
# rounding noise after the re-check on more seeds (docs/evaluation.md, "Verdict codes").
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
        y = self.net(x)
        y[0, 0] += 1.5 * (0.01 + 0.01 * y[0, 0].abs())
        return y
