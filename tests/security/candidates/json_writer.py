# The JSON writer, patched at run time: json.dump keeps its name but goes through
# JSONEncoder.iterencode, which this candidate replaces with one that halves every number in a
# list of timing samples or steady batches. Expected: rejected (the harness's records disagree
# with the parent's clock, or a replaced function is seen), never correct.
import json

import torch
import torch.nn as nn

_real = json.JSONEncoder.iterencode


def _halve(value, key=""):
    if isinstance(value, dict):
        return {k: _halve(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_halve(v, key) for v in value]
    if isinstance(value, float) and key in ("samples_ms", "batches"):
        return value * 0.5
    return value


def _iterencode(self, o, _one_shot=False):
    return _real(self, _halve(o), _one_shot)


setattr(json.JSONEncoder, "iter" + "encode", _iterencode)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
