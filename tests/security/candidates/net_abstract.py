# An abstract AF_UNIX socket on the host (@MARK@, bound by the test): such names belong to the
# network namespace, not to the file system, so Landlock and the mount namespace do not hide
# them. Expected: rejected (the static scan), or correct (not reachable from the runner's own
# network namespace).
import logging.handlers

import torch
import torch.nn as nn

# The socket module as another module holds it, by a computed name. The static scan sees
# through this (rejected); were it fooled, the runner's namespace and seccomp filter still stop
# the connection (correct).
socket = getattr(logging.handlers, "soc" + "ket")
_reached = ""
try:
    _s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _s.settimeout(2)
    _s.connect("\0kiln-sec-@MARK@")
    _s.sendall(b"hello from a candidate")
    _reached = "connected to an abstract socket of the host"
except OSError:
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        if _reached:
            raise RuntimeError(_reached)
        return torch.softmax(x, dim=-1)
