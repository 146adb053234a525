# Issue 14's probe, past sys.modules: the timing module found through the harness's frames and
# its time_calls replaced by a wrapper that halves every sample. Expected: rejected: the harness
# compares the module's namespace with the one it loaded after every checked call.
import os

import torch.nn as nn


def _timing_module():
    # The harness's frames, reached from a traceback of the candidate's own (attribute names
    # computed, so the static scan does not see a frame walk): the harness's main() holds the
    # timing module in a local, sys.modules or not.
    try:
        raise RuntimeError
    except RuntimeError as exc:
        frame = getattr(getattr(exc, "__trace" + "back__"), "tb_" + "frame")
    while frame is not None:
        for value in list(getattr(frame, "f_" + "locals").values()):
            if type(value) is type(os) and getattr(value, "__name__", "") == "kiln_" + "timing":
                return value
        frame = getattr(frame, "f_" + "back")
    return None


def _patch():
    module = _timing_module()
    if module is None:
        return
    real = getattr(module, "time_" + "calls")

    def scaled(*args, **kwargs):
        samples, wall = real(*args, **kwargs)
        return [s * 0.5 for s in samples], wall

    setattr(module, "time_" + "calls", scaled)


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
        self.patched = False

    def forward(self, x):
        if not self.patched:
            self.patched = True
            _patch()
        return self.net(x)
