# Expected verdict: correct, with a `borderline:` note, on every run. One value is put just
# outside the tolerance only when the first input value is positive, about every second seed:
# judged on three trials alone, the verdict would flip between runs (incorrect when any of the
# three seeds hits, correct otherwise); the re-check on more seeds settles it the same way.
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
        if float(x[0, 0]) > 0:
            y[1, 2] -= 1.4 * (0.01 + 0.01 * y[1, 2].abs())
        return y
