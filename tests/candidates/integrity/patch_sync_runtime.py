# Issue 14's variants at run time, past the static scan: torch.cuda.synchronize replaced by a
# no-op and torch.cuda.Event.elapsed_time by a version that reports half, through the type's own
# __setattr__ (no assignment, setattr or __dict__ the scan reads). On a GPU the samples would
# end before the work does and read half; on the CPU the harness never calls them, and the
# replacement alone is the cheat. Expected: rejected: the harness compares the identities it
# saved before the candidate ran.
import torch
import torch.nn as nn

_cuda = getattr(torch, "cu" + "da")
_event = getattr(_cuda, "Ev" + "ent")
_real_elapsed = getattr(_event, "elapsed_" + "time")


def _half(self, other):
    return 0.5 * _real_elapsed(self, other)


type(_cuda).__setattr__(_cuda, "synchro" + "nize", lambda *args, **kwargs: None)
type.__setattr__(_event, "elapsed_" + "time", _half)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
