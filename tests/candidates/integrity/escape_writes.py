# Writes outside the runner's own folders: the harness files kiln installed, the task and
# candidate files of the evaluation's scratch, the folders of other runners (each a sibling of
# this runner's working folder), and new files beside them. The sandbox refuses them all; the
# candidate raises if any write gets through, and otherwise computes the honest softmax. Its own
# folder, /tmp and the runners' shared `cache` folder are writable by design and left alone.
# Expected: correct.
import os

import torch
import torch.nn as nn

_here = os.getcwd()
_work = os.path.dirname(_here)
_targets = []
for _name in sorted(os.listdir(_work)):
    _path = os.path.join(_work, _name)
    if _path == _here or _name == "cache":
        continue
    if os.path.isdir(_path):
        for _inner in ("task.py", "candidate.py", "job" + ".json", "result" + ".json"):
            if os.path.exists(os.path.join(_path, _inner)):
                _targets.append(os.path.join(_path, _inner))
        _targets.append(os.path.join(_path, "planted.txt"))
    elif _name.endswith(".py"):
        _targets.append(_path)  # the harness
_targets.append(os.path.join(_work, "planted.txt"))

_done = []
for _path in _targets:
    _existed = os.path.exists(_path)
    try:
        with open(_path, "a"):
            pass
        _done.append(_path)
        if not _existed:
            os.remove(_path)
    except OSError:
        pass
if not any(t.endswith(".py") for t in _targets):
    raise RuntimeError("found no harness file beside the runner's folder: the test proves nothing")
if _done:
    raise RuntimeError("wrote outside the runner's folders: %s" % _done)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)
