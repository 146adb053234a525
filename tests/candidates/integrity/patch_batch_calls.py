# The steady batches' call counts, doubled in place: each forward walks up the harness's frames
# (names computed) to the timing loop's list of batches and doubles the calls of every batch
# recorded since its last visit, which halves the steady figure without touching a clock.
# Expected: rejected by the outside clock: the runner said each batch's calls as it ran them.
import torch
import torch.nn as nn

_seen = {}


def _double_calls():
    try:
        raise RuntimeError
    except RuntimeError as exc:
        frame = getattr(getattr(exc, "__trace" + "back__"), "tb_" + "frame")
    while frame is not None:
        batches = getattr(frame, "f_" + "locals").get("bat" + "ches")
        if isinstance(batches, list):
            done = _seen.get(id(batches), 0)
            for entry in batches[done:]:
                entry[1] *= 2
            _seen[id(batches)] = len(batches)
        frame = getattr(frame, "f_" + "back")


class ModelNew(nn.Module):
    def forward(self, x):
        _double_calls()
        return torch.softmax(x, dim=-1)
